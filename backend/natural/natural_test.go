package natural

import (
	"slices"
	"strings"
	"testing"
)

func TestCompareOrdersNumbersByValue(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"carts/2", "carts/10", -1},
		{"carts/10", "carts/2", 1},
		{"carts/10", "carts/10", 0},
		{"carts/9-A", "carts/10-A", -1},
		{"carts/10-A", "carts/10-B", -1},
		{"carts/1", "carts/1-A", -1},
		{"carts/", "carts/1", -1},
		{"a", "b", -1},
		{"", "", 0},
		{"", "a", -1},
		{"x9", "x10", -1},
		{"v1.2.10", "v1.2.9", 1},
		{"7", "007", -1}, // same number: fewer leading zeros first
		{"007", "7", 1},
		{"a07c", "a7b", 1}, // the text after the number decides before the zeros
		{"00", "0", 1},
		{"99999999999999999999999999", "100000000000000000000000000", -1}, // no overflow
		{"a1", "a/", 1},  // a digit against other text compares as bytes
		{"a01", "a/", 1}, // whatever the digit
		{"orders/2", "orders/11", -1},
		{"é2", "é10", -1},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestSortedIds(t *testing.T) {
	ids := []string{"carts/10", "carts/2", "carts/1", "carts/100", "carts/20", "cart", "carts/3-b", "carts/3-a", "carts/03-a"}
	slices.SortFunc(ids, Compare)
	want := []string{"cart", "carts/1", "carts/2", "carts/3-a", "carts/03-a", "carts/3-b", "carts/10", "carts/20", "carts/100"}
	if !slices.Equal(ids, want) {
		t.Fatalf("sorted %v, want %v", ids, want)
	}
}

// FuzzCompare checks that Compare is a total order: antisymmetric, equal
// only for equal strings, and transitive on every triple, on inputs from
// short to huge digit runs.
func FuzzCompare(f *testing.F) {
	f.Add("carts/2", "carts/10", "carts/010")
	f.Add("007", "7", "0")
	f.Add("a1b", "a01b", "a1c")
	f.Add(strings.Repeat("9", 5000), strings.Repeat("0", 4000)+"1", "x")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		ab, ba := Compare(a, b), Compare(b, a)
		if ab != -ba {
			t.Fatalf("Compare(%q,%q)=%d but Compare(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if (ab == 0) != (a == b) {
			t.Fatalf("Compare(%q,%q)=%d", a, b, ab)
		}
		s := []string{a, b, c}
		slices.SortFunc(s, Compare)
		if Compare(s[0], s[1]) > 0 || Compare(s[1], s[2]) > 0 || Compare(s[0], s[2]) > 0 {
			t.Fatalf("not transitive: %q", s)
		}
	})
}
