package jsguard

import (
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Deep and huge scripts are refused before goja sees them; ordinary ones,
// and brackets inside strings and comments, pass.
func TestCheck(t *testing.T) {
	ok := []string{
		"map('Pets', p => ({ Name: p.Name, Owner: load(p.OwnerId, 'People').Name }))",
		"this.x = '((((((((((((((((((((((((((((('; // ((((((((((((((((",
		"/* {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{ */ this.y = `[[[[[[[[[[[[[[[[`",
	}
	for _, s := range ok {
		if err := Check("the script", s, DefaultMaxBytes, 10); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
	deep := strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000)
	if err := Check("the map", deep, 1<<20, DefaultMaxDepth); !dberr.Is(err, dberr.BadRequest) || !strings.Contains(err.Error(), "deeper than 200") {
		t.Fatalf("deep: %v", err)
	}
	if err := Check("the map", strings.Repeat("x", DefaultMaxBytes+1), DefaultMaxBytes, DefaultMaxDepth); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("huge: %v", err)
	}
}

// FuzzCheck: whatever Check lets through, goja parses without dying (a
// parse error is fine).
func FuzzCheck(f *testing.F) {
	f.Add("map('A', a => ({x: a.x}))")
	f.Add(strings.Repeat("[", 5000))
	f.Add(strings.Repeat("{a:", 3000) + strings.Repeat("}", 3000))
	f.Add("'" + strings.Repeat("(", 10000) + "'")
	f.Add(strings.Repeat("((", 150) + strings.Repeat("))", 150))
	f.Fuzz(func(t *testing.T, src string) {
		if Check("s", src, 64<<10, DefaultMaxDepth) != nil {
			return
		}
		_, _ = goja.Compile("s.js", src, false)
	})
}
