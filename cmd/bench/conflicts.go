package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// fixedSettings serves one configuration for every database.
type fixedSettings json.RawMessage

func (f fixedSettings) Setting(string, string) json.RawMessage { return json.RawMessage(f) }

// conflictBench measures conflict resolution on n conflicted documents:
//   - on arrival: replicating n concurrent versions into a copy whose
//     resolver is "latest", against replicating n new documents (no
//     conflict) in the same run;
//   - in bulk: a bulk operation resolving n stored conflicts, against
//     overwriting n documents locally with the same chunking.
func conflictBench(out io.Writer, dir string, n int) error {
	ctx := context.Background()
	open := func(name, tag string) (*storage.DB, error) {
		return storage.Open(filepath.Join(dir, name+".db"), storage.Options{Name: "c", NodeTag: tag})
	}
	fill := func(db *storage.DB, prefix, from string) error {
		const per = 1000
		for i := 0; i < n; i += per {
			err := db.Write(ctx, func(tx *storage.Tx) error {
				for j := i; j < min(i+per, n); j++ {
					p, err := document.Parse([]byte(fmt.Sprintf(`{"Name":"item %d","From":%q,"Total":%d,"@metadata":{"@collection":"Items"}}`, j, from, j)))
					if err != nil {
						return err
					}
					if _, err := tx.Put(fmt.Sprintf("%s/%d", prefix, j), p, nil); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	a, err := open("conf-a", "A")
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := open("conf-b", "B")
	if err != nil {
		return err
	}
	defer b.Close()
	if err := fill(a, "items", "A"); err != nil {
		return err
	}
	if err := fill(b, "items", "B"); err != nil {
		return err
	}
	if err := fill(b, "fresh", "B"); err != nil {
		return err
	}

	// Baseline: n new documents replicated (B's "fresh/" ids) into a copy
	// that has none of them. Then n concurrent versions resolved on
	// arrival.
	plain, err := open("conf-plain", "C")
	if err != nil {
		return err
	}
	defer plain.Close()
	t0 := time.Now()
	if _, err := storage.Exchange(ctx, b, plain, 1024); err != nil {
		return err
	}
	base := float64(2*n) / time.Since(t0).Seconds()

	auto := &conflicts.Auto{Engine: conflicts.NewEngine(nil), Settings: fixedSettings(`{}`), NodeTag: "A"}
	a.SetResolver(auto)
	t0 = time.Now()
	got, err := storage.Exchange(ctx, b, a, 1024)
	if err != nil {
		return err
	}
	onArrival := float64(got[storage.Resolved]) / time.Since(t0).Seconds()
	fmt.Fprintf(out, "replicating new documents (baseline):        %8.0f docs/s\n", base)
	fmt.Fprintf(out, "resolved on arrival (latest), %d conflicts: %8.0f docs/s  ratio %.2fx\n", got[storage.Resolved], onArrival, onArrival/base)

	// Bulk: a third copy takes B's versions with no resolver, so n
	// conflicts are stored; then one bulk operation resolves them.
	c, err := open("conf-c", "A")
	if err != nil {
		return err
	}
	defer c.Close()
	if err := fill(c, "items", "C"); err != nil {
		return err
	}
	if _, err := storage.Exchange(ctx, b, c, 1024); err != nil {
		return err
	}
	stored, err := c.ConflictCount(ctx)
	if err != nil {
		return err
	}
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	t0 = time.Now()
	op, err := m.Start(c, conflicts.Spec{Strategy: conflicts.Latest, By: "bench"})
	if err != nil {
		return err
	}
	if err := op.Wait(ctx); err != nil {
		return err
	}
	p := op.Progress()
	bulk := float64(p.Resolved) / time.Since(t0).Seconds()
	if p.Resolved != stored {
		return fmt.Errorf("bulk resolved %d of %d conflicts (%+v)", p.Resolved, stored, p)
	}
	// Baseline: overwriting n documents with the same chunking (128 write
	// requests at a time, merged by group commit).
	t0 = time.Now()
	for i := 0; i < n; i += 128 {
		var wg sync.WaitGroup
		errs := make(chan error, 128)
		for j := i; j < min(i+128, n); j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				p, _ := document.Parse([]byte(fmt.Sprintf(`{"Name":"item %d","From":"again","@metadata":{"@collection":"Items"}}`, j)))
				errs <- c.Write(ctx, func(tx *storage.Tx) error { _, err := tx.Put(fmt.Sprintf("items/%d", j), p, nil); return err })
			}(j)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
	}
	over := float64(n) / time.Since(t0).Seconds()
	fmt.Fprintf(out, "local overwrites, 128 requests at a time (baseline): %8.0f docs/s\n", over)
	fmt.Fprintf(out, "bulk resolution (latest), %d stored conflicts: %8.0f docs/s  ratio %.2fx\n", p.Resolved, bulk, bulk/over)
	return nil
}
