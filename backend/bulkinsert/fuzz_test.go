package bulkinsert_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/bulkinsert"
	"github.com/rookerydb/rookery/backend/storage"
)

// FuzzRun feeds arbitrary bytes to the bulk insert stream reader: it never
// panics, a stream it refuses leaves the documents it committed readable,
// and deep or huge input is refused by its bounds, not by running out of
// memory or stack.
func FuzzRun(f *testing.F) {
	f.Add([]byte(`[{"Id":"users/1","Type":"PUT","Document":{"Name":"a","@metadata":{"@collection":"Users"}}}]`))
	f.Add([]byte(`[{"Id":"users/1","Type":"PUT","Document":{"Name":"a"}},{"Type":"HeartBeat"},{"Id":"x","Type":"Counters"}]`))
	f.Add([]byte(`[{"Id":"a","Type":"PUT","Document":` + strings.Repeat(`{"a":`, 100_000) + `1` + strings.Repeat(`}`, 100_000) + `}]`))
	f.Add([]byte(strings.Repeat("[", 100_000)))
	f.Add([]byte(`[{"Id":"` + strings.Repeat("x", 1<<20) + `","Type":"PUT","Document":{}}]`))
	f.Add([]byte(`[{"Id":"big","Type":"PUT","Document":{"s":"` + strings.Repeat("y", 2<<20) + `"}}]`))
	db, err := storage.Open(filepath.Join(f.TempDir(), "db"), storage.Options{Name: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := bulkinsert.Run(context.Background(), db, bytes.NewReader(data), bulkinsert.Options{MaxDocumentSize: 1 << 20, BatchDocs: 16}, nil)
		if err == nil && p.Processed > p.Total {
			t.Fatalf("processed %d of %d read", p.Processed, p.Total)
		}
	})
}
