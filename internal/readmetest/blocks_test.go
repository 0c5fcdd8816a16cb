package readmetest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// block is one fenced code block of the README.
type block struct {
	Line  int      // 1-based line of the opening fence
	Lang  string   // first word of the info string ("sh", "js", "go", or "")
	Lines []string // the content, as printed
	Name  string   // the marker's runner name, "skip", or "" without a marker
	Note  string   // the marker's text in parentheses (the skip reason)
}

func (b block) String() string { return fmt.Sprintf("README.md:%d (```%s)", b.Line, b.Lang) }

// Text is the block's content as printed, one line per line.
func (b block) Text() string { return strings.Join(b.Lines, "\n") + "\n" }

var (
	fenceRe  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")
	markerRe = regexp.MustCompile(`^<!--\s*readme-test:\s*([a-z0-9-]+)\s*(?:\((.*)\))?\s*-->$`)
)

// parseBlocks finds the fenced code blocks of a Markdown text and the
// readme-test marker right before each. A marker that does not stand
// directly before an opening fence, a malformed marker, a skip without a
// reason and an unclosed fence are errors.
func parseBlocks(md string) ([]block, error) {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	var out []block
	var errs []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "<!--") && strings.Contains(trimmed, "readme-test") {
			m := markerRe.FindStringSubmatch(trimmed)
			if m == nil {
				errs = append(errs, fmt.Sprintf("README.md:%d: malformed marker %q (want <!-- readme-test: NAME (note) --> or <!-- readme-test: skip (reason) -->)", i+1, trimmed))
				continue
			}
			if i+1 >= len(lines) || fenceRe.FindStringSubmatch(lines[i+1]) == nil {
				errs = append(errs, fmt.Sprintf("README.md:%d: marker %q is not on the line right before a fenced code block", i+1, trimmed))
			}
			continue
		}
		f := fenceRe.FindStringSubmatch(line)
		if f == nil {
			continue
		}
		b := block{Line: i + 1, Lang: f[2]}
		if i > 0 {
			if m := markerRe.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.Name, b.Note = m[1], strings.TrimSpace(m[2])
				if b.Name == "skip" && b.Note == "" {
					errs = append(errs, fmt.Sprintf("%s: a skip marker needs a reason: <!-- readme-test: skip (why) -->", b))
				}
			}
		}
		fence := f[1]
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			if len(lines[i])-len(strings.TrimLeft(lines[i], " ")) <= 3 && strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				closed = true
				break
			}
			b.Lines = append(b.Lines, lines[i])
		}
		if !closed {
			errs = append(errs, fmt.Sprintf("%s: the fence is never closed", b))
		}
		out = append(out, b)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// repoRoot is the directory holding go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// readmeBlocks parses the repository's README.md and checks that every
// block is run by a runner or skipped with a reason, that every runner has
// its block, and that the languages match.
func readmeBlocks(t *testing.T) []block {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks(string(md))
	if err != nil {
		t.Fatal(err)
	}
	if problems := checkMarkers(blocks, runners); len(problems) > 0 {
		t.Fatalf("README.md's code blocks and the runners of internal/readmetest disagree:\n%s", strings.Join(problems, "\n"))
	}
	return blocks
}

// checkMarkers lists what is wrong between the blocks and the runners.
func checkMarkers(blocks []block, rs map[string]runner) []string {
	var problems []string
	seen := map[string]bool{}
	for _, b := range blocks {
		switch {
		case b.Name == "":
			problems = append(problems, fmt.Sprintf("%s has no marker: put <!-- readme-test: NAME --> (a runner in internal/readmetest) or <!-- readme-test: skip (reason) --> on the line before its fence", b))
		case b.Name == "skip":
		case seen[b.Name]:
			problems = append(problems, fmt.Sprintf("%s: a second block named %q", b, b.Name))
		default:
			seen[b.Name] = true
			r, ok := rs[b.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: no runner named %q in internal/readmetest", b, b.Name))
			} else if r.lang != b.Lang {
				problems = append(problems, fmt.Sprintf("%s: runner %q runs ```%s blocks", b, b.Name, r.lang))
			}
		}
	}
	var names []string
	for name := range rs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("runner %q has no block in README.md (a marker <!-- readme-test: %s --> was removed?)", name, name))
		}
	}
	return problems
}

// Every fenced block of README.md is run by a runner or skipped with a
// reason (this check needs no tools and no ports).
func TestReadmeBlocksAreMarked(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no fenced code blocks: is this the right file?")
	}
	for _, b := range blocks {
		if b.Name == "skip" {
			t.Logf("%s not run: %s", b, b.Note)
		} else {
			t.Logf("%s run by %q", b, b.Name)
		}
	}
}

// The parser finds fences of both kinds, attaches the marker right before
// a fence only, and the check reports unmarked blocks, unknown names,
// runners without a block, wrong languages and reasonless skips.
func TestParseBlocks(t *testing.T) {
	md := strings.Join([]string{
		"# T",
		"<!-- readme-test: one (a note) -->",
		"```sh",
		"echo 1",
		"  # a comment line",
		"```",
		"",
		"```js",
		"x()",
		"```",
		"<!-- readme-test: skip (needs a browser) -->",
		"~~~~go",
		"```",
		"~~~~",
		"<!-- readme-test: ghost -->",
		"```sh",
		"echo ghost",
		"```",
	}, "\n")
	blocks, err := parseBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{Line: 3, Lang: "sh", Lines: []string{"echo 1", "  # a comment line"}, Name: "one", Note: "a note"},
		{Line: 8, Lang: "js", Lines: []string{"x()"}},
		{Line: 12, Lang: "go", Lines: []string{"```"}, Name: "skip", Note: "needs a browser"},
		{Line: 16, Lang: "sh", Lines: []string{"echo ghost"}, Name: "ghost"},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) || len(blocks) != len(want) {
		t.Fatalf("blocks:\n%#v\nwant:\n%#v", blocks, want)
	}
	for i := range want {
		if !slices.Equal(blocks[i].Lines, want[i].Lines) || blocks[i].Name != want[i].Name || blocks[i].Note != want[i].Note {
			t.Fatalf("block %d: %#v, want %#v", i, blocks[i], want[i])
		}
	}
	problems := checkMarkers(blocks, map[string]runner{"one": {lang: "go"}, "unused": {lang: "sh"}})
	for _, w := range []string{
		`README.md:3 (` + "```sh" + `): runner "one" runs ` + "```go",
		`README.md:8 (` + "```js" + `) has no marker`,
		`README.md:16 (` + "```sh" + `): no runner named "ghost"`,
		`runner "unused" has no block`,
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, w) }) {
			t.Errorf("no problem starting %q in:\n%s", w, strings.Join(problems, "\n"))
		}
	}
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(problems), strings.Join(problems, "\n"))
	}

	for _, bad := range []string{
		"<!-- readme-test: skip -->\n```sh\nx\n```",        // a skip without a reason
		"<!-- readme-test: one -->\n\n```sh\nx\n```",       // not right before the fence
		"<!-- readme-test: Bad Name -->\n```sh\nx\n```",    // malformed
		"<!-- readme-test: one -->\n```sh\nnever closed\n", // unclosed
	} {
		if _, err := parseBlocks(bad); err == nil {
			t.Errorf("parseBlocks(%q) = nil error", bad)
		}
	}
}

// Node lines are told from other lines, and their address, Raft port, data
// directory and expected tag are read from the flags or the comment.
func TestParseNodeLine(t *testing.T) {
	for _, c := range []struct {
		line         string
		ok           bool
		http, raft   int
		dataDir, tag string
	}{
		{"go run ./cmd/studio        # one node: tag A, data in ./data", true, 8080, 9080, "./data", "A"},
		{"go run ./cmd/studio serve --http 127.0.0.1:8081 --data-dir ./data2 --node-tag B", true, 8081, 9081, "./data2", "B"},
		{"go run ./cmd/studio serve --http 127.0.0.1:8082 --data-dir ./dataC --join http://127.0.0.1:8080   # tag C", true, 8082, 9082, "./dataC", "C"},
		{"go run ./cmd/studio serve --http=127.0.0.1:8081 --raft-addr 127.0.0.1:7000", true, 8081, 7000, "./data", ""},
		{"go run ./cmd/studio setup --hosts 127.0.0.1:8443 --out ./certs", false, 0, 0, "", ""},
		{"go run ./cmd/studiox", false, 0, 0, "", ""},
		{"go run ./cmd/bench -quick", false, 0, 0, "", ""},
		{"./scripts/test.sh          # every test", false, 0, 0, "", ""},
	} {
		n, ok, err := parseNodeLine(c.line)
		if err != nil || ok != c.ok {
			t.Errorf("%q: ok %v err %v, want ok %v", c.line, ok, err, c.ok)
			continue
		}
		if ok && (n.httpPort != c.http || n.raftPort != c.raft || n.dataDir != c.dataDir || n.wantTag != c.tag) {
			t.Errorf("%q: %+v", c.line, n)
		}
	}
	if _, ok, err := parseNodeLine("go run ./cmd/studio serve --http 0.0.0.0:8080"); !ok || err == nil {
		t.Errorf("a node on 0.0.0.0: ok %v err %v, want an error", ok, err)
	}
}
