package studio

import (
	"strings"
	"testing"
)

// lineDiff keeps common lines, marks removed and added ones, and its
// output read as "=" and "-" lines gives a, as "=" and "+" lines gives b.
func TestRevisionsLineDiff(t *testing.T) {
	a := strings.Split("{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}", "\n")
	b := strings.Split("{\n  \"a\": 1,\n  \"b\": 20,\n  \"c\": 3,\n  \"d\": 4\n}", "\n")
	d := lineDiff(a, b)
	var ops, left, right []string
	for _, l := range d {
		ops = append(ops, l.Op)
		if l.Op != "+" {
			left = append(left, l.Text)
		}
		if l.Op != "-" {
			right = append(right, l.Text)
		}
	}
	if strings.Join(left, "\n") != strings.Join(a, "\n") || strings.Join(right, "\n") != strings.Join(b, "\n") {
		t.Fatalf("diff does not rebuild its sides: %v", d)
	}
	// Common: "{", "a" and "}"; b and c changed, d added.
	if got := strings.Join(ops, ""); strings.Count(got, "=") != 3 || strings.Count(got, "-") != 2 || strings.Count(got, "+") != 3 {
		t.Fatalf("ops %s", got)
	}
	if n := len(lineDiff(nil, b)); n != len(b) {
		t.Fatalf("all added: %d lines", n)
	}
}
