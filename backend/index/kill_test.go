package index

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// killEnv makes the test binary the indexing process of the kill -9 tests
// (TestKillChild).
const killEnv = "ROOKERY_INDEX_KILL_CHILD"

type killSpec struct {
	Dir   string
	Def   Definition
	Batch int
}

// TestKillChild is not a test: run by the kill -9 tests as a separate
// process, it opens the database and the index and reports the committed
// progress (last indexed etag, re-mapped documents, staleness) on stdout
// every millisecond until it is killed.
func TestKillChild(t *testing.T) {
	spec := os.Getenv(killEnv)
	if spec == "" {
		t.Skip("the indexing process of the kill -9 tests")
	}
	var c killSpec
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(c.Dir, "db.sqlite"), storage.Options{Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := Open(FilePath(filepath.Join(c.Dir, "db.sqlite"), c.Def.Name), c.Def, db, Options{BatchSize: c.Batch})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ix.mu.RLock()
		var remapped int64
		for _, r := range ix.refs {
			remapped += r.remapped
		}
		ix.mu.RUnlock()
		stale, _ := ix.Stale(context.Background())
		fmt.Printf("progress %d %d %t\n", ix.LastIndexedEtag(), remapped, stale)
		time.Sleep(time.Millisecond)
	}
}

// killMidway runs TestKillChild on dir and SIGKILLs it as soon as midway
// says so of a reported (committed) progress; it returns that progress.
func killMidway(t *testing.T, dir string, def Definition, batch int, midway func(etag, remapped int64) bool) (int64, int64) {
	t.Helper()
	spec, _ := json.Marshal(killSpec{Dir: dir, Def: def, Batch: batch})
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var etag, remapped int64
		var stale bool
		if _, err := fmt.Sscanf(sc.Text(), "progress %d %d %t", &etag, &remapped, &stale); err != nil {
			continue
		}
		if midway(etag, remapped) {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			return etag, remapped
		}
		if !stale {
			_ = cmd.Process.Kill()
			t.Fatalf("the indexing process finished before it could be killed midway (etag %d, re-mapped %d)", etag, remapped)
		}
	}
	t.Fatalf("the indexing process ended without being killed: %v %s", sc.Err(), stderr.String())
	return 0, 0
}

// dump is an index file's contents, independent of entry ids and of the
// order fields were added in: entries (id, stored fields and every field's
// columns by field name), the values of multi-valued fields and the
// references, each sorted.
func dump(t *testing.T, ix *Index) string {
	t.Helper()
	r, err := sql.Open("sqlite", "file:"+ix.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names := map[int]string{}
	var cols []string
	rows, err := r.Query(`SELECT name, col FROM fields ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var col int
		if err := rows.Scan(&name, &col); err != nil {
			t.Fatal(err)
		}
		names[col] = name
		cols = append(cols, fmt.Sprintf("'%s', c%d, x%d", name, col, col))
	}
	rows.Close()
	var b strings.Builder
	for _, q := range []string{
		`SELECT doc, id, stored` + func() string {
			if len(cols) == 0 {
				return ""
			}
			return ", " + strings.Join(cols, ", ")
		}() + ` FROM entries ORDER BY doc`,
		`SELECT e.doc, a.col, a.v, a.x FROM arr a JOIN entries e USING(eid) ORDER BY 1, 2, 3`,
		`SELECT * FROM refs ORDER BY 1, 2, 3, 4`,
	} {
		rows, err := r.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(n))
			ptrs := make([]any, len(n))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(q, "FROM arr") {
				vals[1] = names[int(vals[1].(int64))]
			}
			lines = append(lines, fmt.Sprintf("%v", vals))
		}
		rows.Close()
		sort.Strings(lines)
		b.WriteString(strings.Join(lines, "\n") + "\n--\n")
	}
	return b.String()
}

// sameAsFresh builds the definition again under another name (another
// file) and compares the two files' contents and a full-text query.
func sameAsFresh(t *testing.T, db *storage.DB, dir string, ix *Index, query string) {
	t.Helper()
	def := ix.Definition()
	def.Name = "Fresh/" + strings.ReplaceAll(def.Name, "/", "_")
	fresh := openIndex(t, db, dir, def, Options{})
	wait(t, fresh)
	if a, b := dump(t, ix), dump(t, fresh); a != b {
		al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
		for i := range min(len(al), len(bl)) {
			if al[i] != bl[i] {
				t.Errorf("first difference, line %d:\n resumed %s\n fresh   %s", i, al[i], bl[i])
				break
			}
		}
		t.Fatalf("the resumed index differs from a fresh build (%d and %d bytes of dump)", len(a), len(b))
	}
	if a, b := ids(t, ix, query, nil), ids(t, fresh, query, nil); len(a) == 0 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("%s: resumed %d hits, fresh %d", query, len(a), len(b))
	}
}

// An index killed (SIGKILL) in the middle of indexing a large collection
// resumes from the etags it committed: it maps only what is left, and ends
// equal to a fresh build. The same killed file torn (cut to half, its WAL
// lost) is rebuilt from scratch and ends equal too.
func TestKill9MidIndexingResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	const n = 3000
	dir := t.TempDir()
	db := openDB(t, dir)
	for i := 0; i < n; i += 1000 {
		var docs [][3]string
		for j := i; j < min(n, i+1000); j++ {
			docs = append(docs, [3]string{fmt.Sprintf("people/%d", j), "People",
				fmt.Sprintf(`{"Name":"Name%d word%d","Age":%d,"Tags":["t%d","u"]}`, j%977, j%13, j%90, j%7)})
		}
		put(t, db, docs...)
	}
	db.Close()
	def := Definition{Name: "Auto/People/ByAgeAndSearch(Name)AndTags", Type: TypeAutoMap, Collection: "People",
		Fields: []AutoField{{Name: "Age"}, {Name: "Name", Search: true}, {Name: "Tags"}}}
	etag, _ := killMidway(t, dir, def, 50, func(etag, _ int64) bool { return etag >= 300 })
	path := FilePath(filepath.Join(dir, "db.sqlite"), def.Name)
	for _, s := range []string{"", "-wal", "-shm"} {
		if b, err := os.ReadFile(path + s); err == nil {
			if err := os.WriteFile(path+s+".killed", b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	db = openDB(t, dir)
	t.Cleanup(func() { db.Close() })
	ix, err := Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if at := ix.LastIndexedEtag(); at < etag {
		t.Fatalf("reopened at etag %d, but etag %d was committed before the kill", at, etag)
	}
	wait(t, ix)
	if a := ix.Stats().MapAttempts; a > n-etag {
		t.Fatalf("after the kill the index mapped %d documents; %d had been committed: it did not resume", a, etag)
	}
	if s := ix.Stats(); s.EntriesCount != n {
		t.Fatalf("%d entries, want %d", s.EntriesCount, n)
	}
	sameAsFresh(t, db, dir, ix, "search(Name, 'word7') and Tags = 't3'")
	ix.Close()

	// Torn: the killed file cut to half its size, its WAL gone.
	b, err := os.ReadFile(path + ".killed")
	if err != nil {
		t.Fatal(err)
	}
	removeFiles(path)
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	wait(t, ix)
	if a := ix.Stats().MapAttempts; a != n {
		t.Fatalf("a torn file mapped %d documents, want a rebuild of all %d", a, n)
	}
	sameAsFresh(t, db, dir, ix, "search(Name, 'word7') and Tags = 't3'")
}

// An index killed (SIGKILL) in the middle of a reference pass (one owner of
// 3000 pets renamed, re-mapped 50 per batch) resumes inside that owner's
// pets: in the end every pet was re-mapped exactly once (the persisted
// count), nothing was mapped from scratch, every pet shows the new name, and
// the file equals a fresh build.
func TestKill9MidReferencePassResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	const n = 3000
	dir := t.TempDir()
	db := openDB(t, dir)
	putPets(t, db, n)
	def := petsIndex()
	path := FilePath(filepath.Join(dir, "db.sqlite"), def.Name)
	ix, err := Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	ix.Close()
	put(t, db, [3]string{"people/1", "People", `{"Name":"Ayende"}`})
	db.Close()

	_, remapped := killMidway(t, dir, def, 50, func(_, remapped int64) bool { return remapped >= 200 })
	if remapped >= n {
		t.Fatalf("killed after %d re-maps", remapped)
	}
	db = openDB(t, dir)
	t.Cleanup(func() { db.Close() })
	ix, err = Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	wait(t, ix)
	s := ix.Stats()
	if len(s.References) != 1 || s.References[0].Remapped != n {
		t.Fatalf("re-mapped %+v in all, want exactly %d (%d committed before the kill)", s.References, n, remapped)
	}
	if s.MapAttempts != 0 || s.MapReferenceAttempts > n-remapped {
		t.Fatalf("after the kill: %d maps, %d re-maps; want 0 and at most %d", s.MapAttempts, s.MapReferenceAttempts, n-remapped)
	}
	if got := len(ids(t, ix, "OwnerName = 'ayende'", nil)); got != n {
		t.Fatalf("%d of %d pets show the new name", got, n)
	}
	sameAsFresh(t, db, dir, ix, "OwnerName = 'ayende' and Name = 'pet7'")
}
