package changevector

import (
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

const (
	dbA = "ZzT6GeIb4ECL4n7G0SwfPQ"
	dbB = "kCuw9Z0fZ0CnEwyhgxQiDA"
	dbC = "Qfo6Xn1dQEeVq0mZ1W2yXg"
)

func TestParseFormatRoundTrip(t *testing.T) {
	cases := []string{
		"A:1-" + dbA,
		"B:88-" + dbC + ", A:1203-" + dbB,
		"",
	}
	for _, c := range cases {
		v, err := Parse(c)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c, err)
		}
		if got := v.String(); got != c {
			t.Fatalf("round trip %q -> %q", c, got)
		}
	}
}

func TestParseToleratesSeparators(t *testing.T) {
	v, err := Parse("  A:1-" + dbA + ",,  B:2-" + dbB + " ,")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v[1].Tag != "B" || v[1].Etag != 2 || v[1].DBID != dbB {
		t.Fatalf("got %#v", v)
	}
	v, err = Parse("A:1-" + dbA + " | MOVE:67-" + dbB)
	if err != nil || len(v) != 1 {
		t.Fatalf("sharded form: %v %#v", err, v)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []string{"A", "A:", "A:x-" + dbA, ":1-" + dbA, "a:1-" + dbA, "A:1-", "A:-1-" + dbA, "A:1-db!", "A:99999999999999999999-" + dbA} {
		if _, err := Parse(c); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) err = %v, want ErrSyntax", c, err)
		}
	}
}

func TestMergeSortsByDBID(t *testing.T) {
	a, _ := Parse("A:5-" + dbA)
	b, _ := Parse("B:7-" + dbB + ", A:3-" + dbA)
	got := Merge(a, b).String()
	want := "A:5-" + dbA + ", B:7-" + dbB // 'Z' < 'k' in ordinal order
	if got != want {
		t.Fatalf("merge = %q, want %q", got, want)
	}
}

func TestCompare(t *testing.T) {
	p := func(s string) Vector { v, _ := Parse(s); return v }
	cases := []struct {
		remote, local string
		want          Status
	}{
		{"A:1-" + dbA, "A:1-" + dbA, AlreadyMerged},
		{"", "A:1-" + dbA, AlreadyMerged},
		{"A:1-" + dbA, "", Update},
		{"A:2-" + dbA, "A:1-" + dbA, Update},
		{"A:1-" + dbA, "A:2-" + dbA, AlreadyMerged},
		{"A:2-" + dbA, "A:1-" + dbA + ", B:1-" + dbB, Conflict},
		{"A:1-" + dbA + ", B:1-" + dbB, "A:1-" + dbA, Update},
	}
	for _, c := range cases {
		if got := Compare(p(c.remote), p(c.local)); got != c.want {
			t.Errorf("Compare(%q, %q) = %v, want %v", c.remote, c.local, got, c.want)
		}
	}
}

func TestWithEntry(t *testing.T) {
	v, _ := Parse("B:7-" + dbB)
	got := v.WithEntry("A", 9, dbA).String()
	if got != "A:9-"+dbA+", B:7-"+dbB {
		t.Fatalf("got %q", got)
	}
	got = Vector(nil).WithEntry("A", 1, dbA).String()
	if got != "A:1-"+dbA {
		t.Fatalf("got %q", got)
	}
}

func randomVector(r *rand.Rand) Vector {
	ids := []string{dbA, dbB, dbC}
	tags := []string{"A", "B", "C"}
	var v Vector
	for i := range ids {
		if r.Intn(3) > 0 {
			v = append(v, Entry{Tag: tags[i], Etag: int64(r.Intn(5) + 1), DBID: ids[i]})
		}
	}
	return v
}

// Properties of merge and compare: commutative, associative, idempotent;
// conflict is symmetric; a merge dominates its inputs.
func TestMergeCompareProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 5000; i++ {
		a, b, c := randomVector(r), randomVector(r), randomVector(r)
		if Merge(a, b).String() != Merge(b, a).String() {
			t.Fatalf("merge not commutative: %v %v", a, b)
		}
		if Merge(Merge(a, b), c).String() != Merge(a, Merge(b, c)).String() {
			t.Fatalf("merge not associative")
		}
		if Merge(a, a).String() != Merge(a).String() {
			t.Fatalf("merge not idempotent")
		}
		if (Compare(a, b) == Conflict) != (Compare(b, a) == Conflict) {
			t.Fatalf("conflict not symmetric: %v %v", a, b)
		}
		m := Merge(a, b)
		if len(m) > 0 && Compare(a, m) == Conflict {
			t.Fatalf("merge does not dominate %v: %v", a, m)
		}
		if len(a) > 0 && Compare(a, m) == Update {
			t.Fatalf("input newer than merge: %v vs %v", a, m)
		}
	}
}

// Parse bounds the text and the entries of a vector from outside, with the
// position and the flag in the error; ParseStored reads what this node
// wrote without limits.
func TestLimits(t *testing.T) {
	entry := "A:1-" + dbA + ", "
	many := strings.Repeat(entry, DefaultMaxEntries+1)
	if len(many) > DefaultMaxLength {
		t.Fatalf("the entries test needs a vector under the length limit (%d bytes)", len(many))
	}
	for _, c := range []struct{ name, s, want string }{
		{"entries", many, fmt.Sprintf("more than %d entries, the next at position %d (the limit is set by --max-change-vector-entries)", DefaultMaxEntries, DefaultMaxEntries*len(entry))},
		{"length", strings.Repeat(entry, 10_000), fmt.Sprintf("at position %d, more than the %d bytes a change vector may have (the limit is set by --max-change-vector-length)", DefaultMaxLength, DefaultMaxLength)},
		{"one huge entry", "A:1-" + strings.Repeat("x", 1<<20), "--max-change-vector-length"},
	} {
		_, err := Parse(c.s)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want …%s", c.name, err, c.want)
		}
	}
	if v, err := Parse(strings.Repeat(entry, DefaultMaxEntries)); err != nil || len(v) != DefaultMaxEntries {
		t.Fatalf("at the limit: %v", err)
	}
	if v, err := ParseStored(strings.Repeat(entry, 5000)); err != nil || len(v) != 5000 {
		t.Fatalf("ParseStored: %d %v", len(v), err)
	}
	defer func() { _ = SetLimits(0, 0) }()
	if err := SetLimits(100, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(strings.Repeat(entry, 3)); err == nil || !strings.Contains(err.Error(), "more than 2 entries") {
		t.Fatalf("entries over 2: %v", err)
	}
	if err := CheckLength(strings.Repeat("x", 101)); err == nil || !strings.Contains(err.Error(), "at position 100") {
		t.Fatalf("length over 100: %v", err)
	}
	if SetLimits(-1, 0) == nil {
		t.Fatal("a negative limit was accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("A:1-" + dbA)
	f.Add(strings.Repeat("A:1-"+dbA+", ", DefaultMaxEntries+1))
	f.Add(strings.Repeat("A:1-"+dbA+", ", 100_000))
	f.Add(strings.Repeat(",", 1<<20))
	f.Add("A:1-" + strings.Repeat("x", 1<<20))
	f.Add("A:1203-" + dbB + ", B:88-" + dbC)
	f.Add(" ,A:1-x | B:2-y")
	f.Add("A:-1-x")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(v.String())
		if err != nil {
			t.Fatalf("re-parse of %q failed: %v", v.String(), err)
		}
		if again.String() != v.String() {
			t.Fatalf("unstable format %q vs %q", again.String(), v.String())
		}
		_ = Compare(v, again)
		_ = Merge(v, again).String()
	})
}

func TestEtagTemplateEqualsWithEntry(t *testing.T) {
	const dbid = "MMMMMMMMMMMMMMMMMMMMMM"
	for _, text := range []string{
		"",
		"A:5-" + dbid,
		"B:7-AAAAAAAAAAAAAAAAAAAAAA, A:5-" + dbid + ", C:9-ZZZZZZZZZZZZZZZZZZZZZZ",
		"B:7-AAAAAAAAAAAAAAAAAAAAAA",
		"C:9-ZZZZZZZZZZZZZZZZZZZZZZ",
		"B:7-AAAAAAAAAAAAAAAAAAAAAA, C:9-ZZZZZZZZZZZZZZZZZZZZZZ, A:99999-" + dbid,
	} {
		v, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		before, after := v.EtagTemplate("A", dbid)
		for _, e := range []int64{1, 9, 10, 4, 123456789} {
			want := v.WithEntry("A", e, dbid).String()
			if got := before + strconv.FormatInt(e, 10) + after; got != want {
				t.Fatalf("%q, etag %d: template gives %q, WithEntry %q", text, e, got, want)
			}
		}
	}
}
