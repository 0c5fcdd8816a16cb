package bulkinsert_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/bulkinsert"
	"github.com/rookerydb/rookery/backend/storage"
)

// TestEndsAtClosingBracket: the npm client never ends its request body;
// the closing bracket must end the bulk insert.
func TestEndsAtClosingBracket(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(`[{"Id":"a","Type":"PUT","Document":{}},{"Id":"b","Type":"PUT","Document":{"x":1}}]`))
	done := make(chan error, 1)
	go func() {
		_, err := bulkinsert.Run(context.Background(), db, pr, bulkinsert.Options{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the closing bracket")
	}
	if s := db.Stats(); s.Documents != 2 {
		t.Fatalf("%d documents", s.Documents)
	}
}
