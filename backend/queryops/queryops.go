// Package queryops runs patch by query and delete by query: the query
// runner names the matching documents batch by batch, and each batch is
// patched or deleted in one write transaction of the database (so a batch
// shares a group commit, and a failure never leaves half a batch).
package queryops

import (
	"context"
	"fmt"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// BatchSize is how many documents one transaction patches or deletes.
const BatchSize = 256

// Options are a run's options (the query string of PATCH/DELETE /queries).
type Options struct {
	// MaxOpsPerSec bounds the pace (0: as fast as possible).
	MaxOpsPerSec int
	// Details lists every processed document in the result.
	Details bool
	// AllowStale runs over a stale index; otherwise the run waits up to
	// StaleTimeout for it and fails if it is still stale.
	AllowStale   bool
	StaleTimeout time.Duration
}

// Result is BulkOperationResult, as the clients read it.
type Result struct {
	Total                int64
	DocumentsProcessed   int64
	AttachmentsProcessed int64
	CountersProcessed    int64
	TimeSeriesProcessed  int64
	Message              string
	Query                string
	Details              []Detail `json:",omitempty"`
}

// Detail is one processed document.
type Detail struct {
	Id           string //nolint:revive // the wire's name
	ChangeVector string `json:",omitempty"`
	Status       string // Patched, NotModified, Deleted, DocumentDoesNotExist
}

// Progress is what the operation reports while it runs.
type Progress struct {
	Processed int64
	Total     int64
}

func request(req query.Request, o Options) query.Request {
	if !o.AllowStale {
		req.WaitForNonStaleResults = true
		if o.StaleTimeout > 0 {
			req.WaitForNonStaleResultsTimeout = query.Duration(o.StaleTimeout)
		}
	}
	return req
}

func pace(ctx context.Context, o Options, n int, since time.Time) error {
	if o.MaxOpsPerSec <= 0 {
		return nil
	}
	want := time.Duration(float64(n) / float64(o.MaxOpsPerSec) * float64(time.Second))
	if wait := want - time.Since(since); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Patch runs `from … update { script }` over the matches: each document is
// patched with the script (the query's parameters as args), and written
// only when the script changed it.
func Patch(ctx context.Context, r *query.Runner, db *storage.DB, req query.Request, o Options, report func(Progress)) (*Result, error) {
	q, err := rql.Parse(req.Query)
	if err != nil {
		return nil, &query.InvalidQueryError{Query: req.Query, Err: err}
	}
	if q.Update == nil {
		return nil, &query.InvalidQueryError{Query: req.Query, Err: fmt.Errorf("a patch by query needs an update { ... } clause")}
	}
	script, err := patch.Compile(*q.Update, q.Alias)
	if err != nil {
		return nil, err
	}
	res := &Result{Query: req.Query}
	start := time.Now()
	_, err = r.IDs(ctx, db, request(req, o), BatchSize, func(ids []string) error {
		var details []Detail
		err := db.Write(ctx, func(tx *storage.Tx) error {
			details = details[:0]
			for _, id := range ids {
				d, err := tx.Get(id)
				if err != nil {
					return err
				}
				if d == nil {
					details = append(details, Detail{Id: id, Status: "DocumentDoesNotExist"})
					continue
				}
				out, changed, err := script.Run(d.AppendJSON(nil), patch.Env{Args: req.QueryParameters, Load: func(other string) ([]byte, error) {
					od, err := tx.Get(other)
					if err != nil || od == nil {
						return nil, err
					}
					return od.AppendJSON(nil), nil
				}, Put: func(other string, doc []byte, cv *string) (string, error) {
					parsed, err := document.Parse(doc)
					if err != nil {
						return "", dberr.New(dberr.BadRequest, "put('%s'): %v", other, err)
					}
					info, err := tx.Put(other, parsed, cv)
					return info.ID, err
				}, Delete: func(other string, cv *string) (bool, error) {
					_, deleted, err := tx.Delete(other, cv)
					return deleted, err
				}, Counters: storage.PatchCounters{Tx: tx}})
				if err != nil {
					return fmt.Errorf("patching %s: %w", id, err)
				}
				if !changed {
					details = append(details, Detail{Id: id, ChangeVector: d.ChangeVector, Status: "NotModified"})
					continue
				}
				parsed, err := document.Parse(out)
				if err != nil {
					return dberr.New(dberr.BadRequest, "the patched %s is not a document: %v", id, err)
				}
				info, err := tx.Put(id, parsed, nil)
				if err != nil {
					return err
				}
				details = append(details, Detail{Id: id, ChangeVector: info.ChangeVector, Status: "Patched"})
			}
			return nil
		})
		if err != nil {
			return err
		}
		res.Total += int64(len(ids))
		res.DocumentsProcessed += int64(len(ids))
		if o.Details {
			res.Details = append(res.Details, details...)
		}
		if report != nil {
			report(Progress{Processed: res.Total})
		}
		return pace(ctx, o, int(res.Total), start)
	})
	if err != nil {
		return nil, err
	}
	res.Message = fmt.Sprintf("Processed %d items.", res.Total)
	return res, nil
}

// Delete deletes the matches.
func Delete(ctx context.Context, r *query.Runner, db *storage.DB, req query.Request, o Options, report func(Progress)) (*Result, error) {
	res := &Result{Query: req.Query}
	start := time.Now()
	_, err := r.IDs(ctx, db, request(req, o), BatchSize, func(ids []string) error {
		var details []Detail
		err := db.Write(ctx, func(tx *storage.Tx) error {
			details = details[:0]
			for _, id := range ids {
				_, deleted, err := tx.Delete(id, nil)
				if err != nil {
					return err
				}
				st := "Deleted"
				if !deleted {
					st = "DocumentDoesNotExist"
				}
				details = append(details, Detail{Id: id, Status: st})
			}
			return nil
		})
		if err != nil {
			return err
		}
		res.Total += int64(len(ids))
		res.DocumentsProcessed += int64(len(ids))
		if o.Details {
			res.Details = append(res.Details, details...)
		}
		if report != nil {
			report(Progress{Processed: res.Total})
		}
		return pace(ctx, o, int(res.Total), start)
	})
	if err != nil {
		return nil, err
	}
	res.Message = fmt.Sprintf("Processed %d items.", res.Total)
	return res, nil
}
