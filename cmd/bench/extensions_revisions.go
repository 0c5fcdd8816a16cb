package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// revisionsBench measures document puts with revisions off and on, in the
// same run and the same shape: n puts in transactions of 100, updating
// n/10 ids ten times each (so every id collects revisions and the
// keep-last-5 purge runs on every write with revisions on). Two rounds
// each, interleaved; the best round of each side counts.
func revisionsBench(out io.Writer, dir string, n int) error {
	ctx := context.Background()
	ids := max(n/10, 1)
	run := func(name string, cfg string) (float64, error) {
		db, err := storage.Open(filepath.Join(dir, name+".db"), storage.Options{Name: "r", NodeTag: "A"})
		if err != nil {
			return 0, err
		}
		defer db.Close()
		if cfg != "" {
			db.SetRevisionsSource(func() []byte { return []byte(cfg) })
		}
		t0 := time.Now()
		const per = 100
		for i := 0; i < n; i += per {
			err := db.Write(ctx, func(tx *storage.Tx) error {
				for j := i; j < min(i+per, n); j++ {
					p, err := document.Parse([]byte(fmt.Sprintf(`{"Name":"item %d","Version":%d,"Total":%d,"@metadata":{"@collection":"Items"}}`, j%ids, j/ids, j)))
					if err != nil {
						return err
					}
					if _, err := tx.Put(fmt.Sprintf("items/%d", j%ids), p, nil); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return 0, err
			}
		}
		return float64(n) / time.Since(t0).Seconds(), nil
	}
	var off, on float64
	for round := 0; round < 2; round++ {
		o, err := run(fmt.Sprintf("rev-off-%d", round), "")
		if err != nil {
			return err
		}
		r, err := run(fmt.Sprintf("rev-on-%d", round), `{"Default":{"MinimumRevisionsToKeep":5}}`)
		if err != nil {
			return err
		}
		off, on = max(off, o), max(on, r)
	}
	fmt.Fprintf(out, "puts, revisions off:                  %8.0f docs/s\n", off)
	fmt.Fprintf(out, "puts, revisions on (keep last 5):     %8.0f docs/s  ratio %.2fx\n", on, on/off)
	return nil
}
