package smuggler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// Ext is a dump file's extension.
const Ext = ".ravendbdump"

// DumpPath resolves a path a user names below the server's dump directory
// (--dump-dir): relative, no "..", no absolute path, nothing that leaves
// root. Server-side imports and exports read and write only there.
func DumpPath(root, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return root, nil
	}
	if len(name) > 1024 || strings.ContainsRune(name, 0) {
		return "", dberr.New(dberr.BadRequest, "the path %.40q is not a path below the dump directory", name)
	}
	clean := filepath.Clean(filepath.FromSlash(name))
	if !filepath.IsLocal(clean) {
		return "", dberr.New(dberr.BadRequest, "the path %q must be relative to the server's dump directory (--dump-dir), without '..'", name)
	}
	return filepath.Join(root, clean), nil
}

// Multi is a server-level export or import of several databases: the
// result of each, as they go.
type Multi struct {
	mu      sync.Mutex
	Results map[string]*Result
	Errors  map[string]string
	Order   []string
}

// NewMulti starts an empty server-level result.
func NewMulti() *Multi { return &Multi{Results: map[string]*Result{}, Errors: map[string]string{}} }

func (m *Multi) start(db string) *Result {
	r := NewResult(time.Now())
	m.mu.Lock()
	m.Results[db] = r
	m.Order = append(m.Order, db)
	m.mu.Unlock()
	return r
}

func (m *Multi) fail(db string, err error) {
	m.mu.Lock()
	m.Errors[db] = err.Error()
	m.mu.Unlock()
}

// Snapshot is the state of every database's part: {"Databases":[{"Name",
// "Result","Error"}]}.
func (m *Multi) Snapshot() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []map[string]any
	for _, db := range m.Order {
		e := map[string]any{"Name": db, "Result": m.Results[db].Snapshot()}
		if msg, ok := m.Errors[db]; ok {
			e["Error"] = msg
		}
		out = append(out, e)
	}
	return map[string]any{"Databases": out}
}

// Err is the first failure, if any.
func (m *Multi) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.Errors) == 0 {
		return nil
	}
	var parts []string
	for _, db := range m.Order {
		if e, ok := m.Errors[db]; ok {
			parts = append(parts, db+": "+e)
		}
	}
	return errors.New(strings.Join(parts, "; "))
}

// ExportDir exports each database to <dir>/<name>.ravendbdump, one after
// the other. A file is written under a temporary name and renamed when
// complete, so a dump in the directory is always whole. A database that
// fails is recorded and the others go on.
func ExportDir(ctx context.Context, dbs []*storage.DB, svc Services, o Options, dir string, m *Multi) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("the dump directory: %w", err)
	}
	for _, db := range dbs {
		if err := ctx.Err(); err != nil {
			return err
		}
		res := m.start(db.Name())
		if err := exportFile(ctx, db, svc, o, filepath.Join(dir, db.Name()+Ext), res); err != nil {
			m.fail(db.Name(), err)
		}
	}
	return nil
}

func exportFile(ctx context.Context, db *storage.DB, svc Services, o Options, path string, res *Result) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Export(ctx, db, svc, o, tmp, res); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// DirEntries lists the dumps of a directory: database name → file.
func DirEntries(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "the dump directory: %v", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), Ext) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out[strings.TrimSuffix(e.Name(), Ext)] = filepath.Join(dir, e.Name())
	}
	return out, nil
}

// ImportFile imports one dump file into db, after checking it whole
// (dump.Verify: a damaged compressed dump imports nothing).
func ImportFile(ctx context.Context, db *storage.DB, svc Services, o Options, path string, lim dump.Limits, res *Result) error {
	f, err := os.Open(path)
	if err != nil {
		return dberr.New(dberr.BadRequest, "the dump file: %v", err)
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if err := verifyFirst(ctx, res, res.Track(f, size)); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	res.posDone.Store(0)
	return Import(ctx, db, svc, o, res.Track(f, size), lim, res)
}

// ImportSpooled imports a dump that can be read only once (an upload): it
// is copied into a temporary file beside db's (at most the upload's size)
// while dump.Verify checks it whole, then imported from that file, which is
// removed after. A damaged compressed dump imports nothing. The progress
// counts the check, then the import.
func ImportSpooled(ctx context.Context, db *storage.DB, svc Services, o Options, r io.Reader, lim dump.Limits, res *Result) error {
	f, err := os.CreateTemp(filepath.Dir(db.Path()), "import-*.tmp")
	if err != nil {
		return err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	// On its own goroutine, as the import's reading: a read blocked on a
	// client that stopped sending ends when the request does, and a
	// cancelled import does not wait for it (its writes then fail on the
	// closed file).
	verified := make(chan error, 1)
	go func() { verified <- dump.Verify(ctx, io.TeeReader(r, f)) }()
	select {
	case err = <-verified:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		res.message("ERROR", "%v", err)
		res.finish(time.Now())
		return err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	res.posDone.Store(0)
	return Import(ctx, db, svc, o, res.Track(f, size), lim, res)
}

// verifyFirst runs dump.Verify over r, and records a damaged dump in res
// as Import records its errors.
func verifyFirst(ctx context.Context, res *Result, r io.Reader) error {
	err := dump.Verify(ctx, r)
	if err != nil {
		res.message("ERROR", "%v", err)
		res.finish(time.Now())
	}
	return err
}

// SortedNames returns the keys of a directory listing in order.
func SortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ImportDir imports each <name>.ravendbdump of the listing into the
// database open returns for name (which may create it).
func ImportDir(ctx context.Context, files map[string]string, open func(name string) (*storage.DB, error), svc Services, o Options, lim dump.Limits, m *Multi) error {
	for _, name := range SortedNames(files) {
		if err := ctx.Err(); err != nil {
			return err
		}
		res := m.start(name)
		db, err := open(name)
		if err != nil {
			m.fail(name, err)
			continue
		}
		if err := ImportFile(ctx, db, svc, o, files[name], lim, res); err != nil {
			m.fail(name, err)
		}
	}
	return nil
}
