package names

import (
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/dberr"
)

func TestNames(t *testing.T) {
	for _, ok := range []string{"shop", "x.deleting", "A_b-1.2", strings.Repeat("a", 128)} {
		if err := Database(ok); err != nil {
			t.Errorf("Database(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../../escapee", "a/b", "a b", "a\x00", strings.Repeat("a", 129)} {
		if Database(bad) == nil {
			t.Errorf("Database(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"A", "ABCD"} {
		if err := NodeTag(ok); err != nil {
			t.Errorf("NodeTag(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a", "ABCDE", "A1", "../"} {
		if NodeTag(bad) == nil {
			t.Errorf("NodeTag(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"orders feed", "Über-Abo 1", "12", "team/a"} {
		if err := Subscription(ok); err != nil {
			t.Errorf("Subscription(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\x00b", "../../x", "a/../b", "/x", "x/", "a//b", `a\b`, " x", "x\n", "\xff", strings.Repeat("s", 100<<10)} {
		err := Subscription(bad)
		if err == nil {
			t.Errorf("Subscription(%q) accepted", bad)
		} else if len(err.Error()) > 300 {
			t.Errorf("the error for a long name is %d bytes long", len(err.Error()))
		}
	}
	if NodeURL("http://127.0.0.1:8080") != nil || NodeURL("https://a.example.com") != nil {
		t.Error("good URLs refused")
	}
	for _, bad := range []string{"ftp://x", "http://", "javascript:alert(1)", "http://u:p@h:1", "http://h:1/x?y"} {
		if NodeURL(bad) == nil {
			t.Errorf("NodeURL(%q) accepted", bad)
		}
	}
	if HostPort("127.0.0.1:9000") != nil || HostPort("nope") == nil {
		t.Error("HostPort")
	}
}

func TestIndexNames(t *testing.T) {
	for _, ok := range []string{"Auto/Orders/ByName", "Auto/Orders/BySearch(Name)", "Auto/Orders/ByLines[].Price", "Pets/ByOwner", "Überall"} {
		if err := Index(ok); err != nil {
			t.Errorf("Index(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " x", "x ", "a\x00b", "a\nb", "\xff", strings.Repeat("a", MaxIndex+1)} {
		err := Index(bad)
		if err == nil || !dberr.Is(err, dberr.BadRequest) {
			t.Errorf("Index(%q) = %v, want a BadRequest", bad, err)
		}
	}
}
