package studio

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The editor's two readers of untrusted text: where a refused text breaks
// (docSyntaxPlace) and which strings of a stored body may be ids
// (refCandidates). Both walk with jsontext's decoder, without recursion;
// deep and huge inputs must neither crash nor escape their bounds.

func editorSeeds() []string {
	return []string{
		"", "{}", `{"a":1}`, "{\n \"a\": tru\n}", `{"a":"\u00e9","b":[1,2,{"c":"d"}]}`, "{\"a\":1} x", "\xff\xfe", `{"a":"b`,
		strings.Repeat("[", 100_000), strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000),
		`{"a":"` + strings.Repeat("x", 1<<20) + `"}`, `{"@metadata":{"@collection":"X","r":"users/1"},"u":"users/1"}`,
		"{\n" + strings.Repeat(`"k":"v",`+"\n", 5000) + `"z":}`,
	}
}

func FuzzDocSyntaxPlace(f *testing.F) {
	for _, s := range editorSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		line, col, reason, ok := docSyntaxPlace(text)
		if !ok {
			if line != 0 || col != 0 {
				t.Fatalf("well-formed but placed at %d:%d", line, col)
			}
			return
		}
		lines := strings.Count(text, "\n") + 1
		if line < 1 || line > lines || col < 1 || col > utf8.RuneCountInString(text)+1 || reason == "" {
			t.Fatalf("place %d:%d (%q) outside %d lines of %q", line, col, reason, lines, text)
		}
	})
}

func FuzzRefCandidates(f *testing.F) {
	for _, s := range editorSeeds() {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, body string, limit int) {
		limit = max(0, limit%300)
		cands, capped := refCandidates([]byte(body), "self/1", limit)
		if len(cands) > limit || (capped && len(cands) != limit) {
			t.Fatalf("%d candidates (capped %v) for a limit of %d", len(cands), capped, limit)
		}
		seen := map[string]bool{}
		for _, c := range cands {
			if !refShaped(c.value) || strings.EqualFold(c.value, "self/1") || seen[strings.ToLower(c.value)] || !strings.HasPrefix(c.path, "/") {
				t.Fatalf("bad candidate %+v", c)
			}
			seen[strings.ToLower(c.value)] = true
		}
	})
}

// Deep and huge texts are placed, quickly, without a stack to grow.
func TestDocSyntaxPlaceDeepAndHuge(t *testing.T) {
	deep := strings.Repeat("[", 1_000_000)
	if line, col, _, ok := docSyntaxPlace(deep); !ok || line != 1 || col < 2 {
		t.Fatalf("deep: %d:%d %v", line, col, ok)
	}
	huge := "{\"a\":[\n" + strings.Repeat(`"`+strings.Repeat("é", 100)+`",`+"\n", 50_000) + `nul]}`
	line, col, _, ok := docSyntaxPlace(huge)
	if !ok || line != 50_002 || col != 4 {
		t.Fatalf("huge: %d:%d %v, want 50002:4", line, col, ok)
	}
	cands, capped := refCandidates([]byte(`{"a":`+strings.Repeat("[", 100_000)+`"x"`), "self", 10)
	if len(cands) != 0 || capped {
		t.Fatalf("a broken deep body gave %v %v", cands, capped)
	}
}
