package bulkinsert_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/bulkinsert"
	"github.com/rookerydb/rookery/backend/storage"
)

// BenchmarkRun: b.N documents of ~900 bytes through one bulk insert.
func BenchmarkRun(b *testing.B) {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 30)[:700]
	var body bytes.Buffer
	body.WriteByte('[')
	for i := 0; i < b.N; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"Id":"users/%d-A","Type":"PUT","Document":{"name":"User %d","email":"user%d@example.com","address":{"street":"%d Main St","city":"Springfield"},"tags":["a","b","c"],"age":%d,"notes":"%s","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}}}`, i, i, i, i, i%50, pad)
	}
	body.WriteByte(']')
	db, err := storage.Open(filepath.Join(b.TempDir(), "db"), storage.Options{Name: "b"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.SetBytes(int64(body.Len() / max(b.N, 1)))
	b.ResetTimer()
	p, err := bulkinsert.Run(context.Background(), db, &body, bulkinsert.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if p.Processed != int64(b.N) {
		b.Fatalf("%d processed", p.Processed)
	}
}
