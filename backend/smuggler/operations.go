package smuggler

import (
	"context"
	"fmt"
	"time"

	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// Operation kinds, as the registry lists them (the studio's notification
// area and pages pick theirs by kind).
const (
	KindExport       = "DatabaseExport"
	KindImport       = "DatabaseImport"
	KindServerExport = "ServerExport"
	KindServerImport = "ServerImport"
)

// publishEvery is how often a running job's counters reach its operation.
const publishEvery = 200 * time.Millisecond

// Publish sets p from snap every 200 ms until the returned stop is called
// or ctx ends.
func Publish(ctx context.Context, p *operations.Progress, snap func() map[string]any) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(publishEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.Set(snap())
			}
		}
	}()
	return cancel
}

// StartExportDir starts ExportDir as a server-wide operation of reg
// (database ""), each database's result in its progress as it goes; where
// names the directory for the operation's description. It returns the
// operation's id at once. The API's POST /admin/smuggler/export-dir and
// the studio's server page both start it.
func StartExportDir(reg *operations.Registry, dbs []*storage.DB, svc Services, o Options, dir, where string) (int64, error) {
	m := NewMulti()
	return reg.Start("", 0, KindServerExport, fmt.Sprintf("export of %d databases to %s", len(dbs), where), true,
		func(ctx context.Context, p *operations.Progress) (any, error) {
			stop := Publish(ctx, p, m.Snapshot)
			defer func() { stop(); p.Set(m.Snapshot()) }() // a failed one keeps every database's part
			if err := ExportDir(ctx, dbs, svc, o, dir, m); err != nil {
				return nil, err
			}
			if err := m.Err(); err != nil {
				return nil, err
			}
			return m.Snapshot(), nil
		})
}

// StartImportDir starts ImportDir of files as a server-wide operation of
// reg, like StartExportDir.
func StartImportDir(reg *operations.Registry, files map[string]string, open func(name string) (*storage.DB, error), svc Services, o Options, lim dump.Limits, where string) (int64, error) {
	m := NewMulti()
	return reg.Start("", 0, KindServerImport, fmt.Sprintf("import of %d dumps from %s", len(files), where), true,
		func(ctx context.Context, p *operations.Progress) (any, error) {
			stop := Publish(ctx, p, m.Snapshot)
			defer func() { stop(); p.Set(m.Snapshot()) }()
			if err := ImportDir(ctx, files, open, svc, o, lim, m); err != nil {
				return nil, err
			}
			if err := m.Err(); err != nil {
				return nil, err
			}
			return m.Snapshot(), nil
		})
}
