package batch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/testserver"
)

func TestParseSessionBatch(t *testing.T) {
	body := `{"Commands":[
		{"Id":"users/1-A","Document":{"name":"John","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}},"Type":"PUT"},
		{"Id":"companies|","ChangeVector":null,"OriginalChangeVector":null,"Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT","ForceRevisionCreationStrategy":"None"},
		{"Id":"x","ChangeVector":"","Document":{},"Type":"PUT"},
		{"Id":"literals/1","ChangeVector":null,"Type":"DELETE"}
	],"TransactionMode":"SingleNode"}`
	cmds, err := batch.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 4 {
		t.Fatalf("%d commands", len(cmds))
	}
	if cmds[0].Type != batch.Put || cmds[0].ID != "users/1-A" || cmds[0].ChangeVector != nil || cmds[0].Document.Collection != "Users" {
		t.Fatalf("cmd0 %+v", cmds[0])
	}
	if cmds[2].ChangeVector == nil || *cmds[2].ChangeVector != "" {
		t.Fatal("empty change vector must mean must-be-new")
	}
	if cmds[3].Type != batch.Delete || cmds[3].ID != "literals/1" {
		t.Fatalf("cmd3 %+v", cmds[3])
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		"not json":             `nope`,
		"array":                `[]`,
		"no commands":          `{}`,
		"commands object":      `{"Commands":{}}`,
		"truncated":            `{"Commands":[{"Id":"a","Type":"PUT","Document":{}}`,
		"put no doc":           `{"Commands":[{"Id":"a","Type":"PUT"}]}`,
		"delete no id":         `{"Commands":[{"Type":"DELETE"}]}`,
		"no type":              `{"Commands":[{"Id":"a","Document":{}}]}`,
		"patch without script": `{"Commands":[{"Id":"a","Type":"PATCH","Patch":{"Values":{}}}]}`,
		"patch without id":     `{"Commands":[{"Type":"PATCH","Patch":{"Script":"x"}}]}`,
		"unknown type":         `{"Commands":[{"Id":"a","Type":"AttachmentPUT"}]}`,
		"id number":            `{"Commands":[{"Id":5,"Type":"DELETE"}]}`,
		"doc array":            `{"Commands":[{"Id":"a","Type":"PUT","Document":[]}]}`,
		"bad collection":       `{"Commands":[{"Id":"a","Type":"PUT","Document":{"@metadata":{"@collection":1}}}]}`,
		"trailing":             `{"Commands":[]} x`,
		"cluster-wide":         `{"Commands":[],"TransactionMode":"ClusterWide"}`,
		"command not object":   `{"Commands":[1]}`,
	}
	for name, body := range cases {
		_, err := batch.Parse(strings.NewReader(body))
		if !dberr.Is(err, dberr.BadRequest) {
			t.Errorf("%s: err = %v, want BadRequest", name, err)
		}
	}
}

func openDB(t *testing.T) *storage.DB {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "t", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func run(t *testing.T, c *cluster.Cluster, db *storage.DB, body string) ([]batch.Result, error) {
	t.Helper()
	cmds, err := batch.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return batch.Execute(context.Background(), db, ids.Cluster{Src: c}, cmds)
}

func TestExecuteIdentitiesAndAllOrNothing(t *testing.T) {
	db := openDB(t)
	c := testserver.Cluster(t, "t")
	res, err := run(t, c, db, `{"Commands":[
		{"Id":"Companies|","Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT"},
		{"Id":"companies|","Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT"},
		{"Id":"companies/","Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ID != "Companies/1" || res[1].ID != "companies/2" || !strings.HasPrefix(res[2].ID, "companies/000000000000000000") {
		t.Fatalf("ids %v %v %v", res[0].ID, res[1].ID, res[2].ID)
	}
	// The second command fails: no document of the batch stays. The identity
	// value is consumed (it went through the log), as in RavenDB.
	_, err = run(t, c, db, `{"Commands":[
		{"Id":"companies|","Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT"},
		{"Id":"companies/1","ChangeVector":"A:999-zz","Document":{"@metadata":{"@collection":"Companies"}},"Type":"PUT"}]}`)
	if !dberr.Is(err, dberr.Concurrency) {
		t.Fatalf("err %v", err)
	}
	if d, _ := db.Get(context.Background(), "companies/3"); d != nil {
		t.Fatal("rejected batch left a document")
	}
	if counters := c.Identities("t"); counters["companies|"] != 3 {
		t.Fatalf("counters after the rejected batch: %v", counters)
	}
	// An identity id with a change vector is refused.
	_, err = run(t, c, db, `{"Commands":[{"Id":"companies|","ChangeVector":"A:1-x","Document":{},"Type":"PUT"}]}`)
	if !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("err %v", err)
	}
	// Delete of a missing document is a no-op result.
	res, err = run(t, c, db, `{"Commands":[{"Id":"nope/1","Type":"DELETE"},{"Id":"companies/2","Type":"DELETE"}]}`)
	if err != nil || res[0].Deleted || !res[1].Deleted || res[1].ChangeVector == "" {
		t.Fatalf("delete results %+v %v", res, err)
	}
}

// A document nested past the depth limit, anywhere in a batch, fails the
// whole batch with a 400 giving the byte offset in the body and the flag.
func TestParseDepth(t *testing.T) {
	const head = `{"Commands":[{"Id":"a","Type":"PUT","Document":{"x":`
	limit := document.DefaultMaxDepth
	for _, c := range []struct {
		name, body string
		at         int // 0: only the message is checked
	}{
		{"at the limit + 1", head + strings.Repeat("[", limit) + strings.Repeat("]", limit) + `}}]}`, len(head) + limit - 1},
		{"100k arrays", head + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}}]}`, 0},
		{"100k in a skipped field", `{"Commands":[{"Id":"a","Type":"DELETE","Extra":` + strings.Repeat("[", 100_000) + `}]}`, 0},
		{"100k unclosed", head + strings.Repeat("[", 100_000), 0},
	} {
		_, err := batch.Parse(strings.NewReader(c.body))
		want := fmt.Sprintf("nested deeper than %d levels at byte ", limit)
		if c.at > 0 {
			want += fmt.Sprint(c.at)
		}
		if !dberr.Is(err, dberr.BadRequest) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--max-json-depth") {
			t.Errorf("%s: %v, want a 400 with %q", c.name, err, want)
		}
	}
	ok := head + strings.Repeat("[", limit-1) + strings.Repeat("]", limit-1) + `}}]}`
	if _, err := batch.Parse(strings.NewReader(ok)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"Commands":[{"Id":"users/1-A","Document":{"name":"John","@metadata":{"@collection":"Users"}},"Type":"PUT"}]}`)
	const head = `{"Commands":[{"Id":"a","Type":"PUT","Document":{"x":`
	for _, n := range []int{document.DefaultMaxDepth, 10_001, 100_000} {
		f.Add(head + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}]}`)
	}
	f.Add(head + strings.Repeat(`{"a":`, 100_000))
	f.Add(strings.Repeat("[", 100_000))
	f.Add(`{"Commands":[{"Id":"a","Type":"DELETE","Extra":` + strings.Repeat("{\"a\":", 100_000) + `}]}`)
	f.Add(`{"Commands":[{"Id":"a","Type":"DELETE","ChangeVector":"` + strings.Repeat("A:1-abcdefghijklmnopqrstuv, ", 40_000) + `"}]}`)
	f.Add(`{"Commands":[{"Id":"a|","ChangeVector":"","Document":{},"Type":"PUT"},{"Id":"b","Type":"DELETE","ChangeVector":"A:1-x"}],"TransactionMode":"SingleNode"}`)
	f.Add(`{"Commands":null}`)
	f.Add(`{"Commands":[{"Type":"PATCH"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		cmds, err := batch.Parse(strings.NewReader(body))
		if err != nil {
			if !dberr.Is(err, dberr.BadRequest) {
				t.Fatalf("parse error of the wrong kind: %v", err)
			}
			return
		}
		for _, c := range cmds {
			switch c.Type {
			case batch.Put:
				if len(c.Document.Body) < 2 || c.Document.Collection == "" {
					t.Fatalf("PUT without a stored body: %+v", c)
				}
			case batch.Delete:
				if strings.TrimSpace(c.ID) == "" {
					t.Fatal("DELETE without id")
				}
			default:
				t.Fatalf("unexpected type %q", c.Type)
			}
		}
		// With a document limit: the same commands when every document
		// fits, a TooLarge error naming the limit when one does not, and
		// never a stored body much larger than the limit.
		const limit = 48
		small, err := batch.ParseMax(strings.NewReader(body), limit)
		if err != nil {
			var se *document.SizeError
			if !dberr.Is(err, dberr.TooLarge) || !errors.As(err, &se) || se.Max != limit || se.Size <= limit {
				t.Fatalf("ParseMax refused a batch Parse took, with %v", err)
			}
			return
		}
		if len(small) != len(cmds) {
			t.Fatalf("ParseMax: %d commands, Parse: %d", len(small), len(cmds))
		}
		for _, c := range small {
			// The stored form may add an empty "@metadata":{} (15 bytes).
			if len(c.Document.Body) > limit+16 {
				t.Fatalf("a %d-byte document passed a %d-byte limit", len(c.Document.Body), limit)
			}
		}
	})
}

// countingReader counts what was read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// A document over the limit stops the read about where it crosses it, even
// when it is one endless string: the batch is not buffered up to the
// request-body limit first.
func TestParseMaxStopsEarly(t *testing.T) {
	const limit = 1 << 20
	body := &countingReader{r: io.MultiReader(strings.NewReader(`{"Commands":[{"Id":"a","Type":"PUT","Document":{"x":1},"ChangeVector":null},{"Id":"b","Type":"PUT","Document":{"x":"`), endless('a'))}
	_, err := batch.ParseMax(body, limit)
	var se *document.SizeError
	if !dberr.Is(err, dberr.TooLarge) || !errors.As(err, &se) || se.Max != limit || !strings.Contains(err.Error(), `command 1 ("b")`) {
		t.Fatalf("err %v", err)
	}
	if body.n > 2*limit+64<<10 {
		t.Fatalf("read %d bytes for a %d-byte limit", body.n, limit)
	}
}
