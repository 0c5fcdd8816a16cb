package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// maxSmugglerOptions bounds the options of an export or import (a
// transform script is the only large part).
const maxSmugglerOptions = 1 << 20

func (a *API) registerSmuggler(g *echo.Group) {
	g.POST("/smuggler/export", a.smugglerExport)
	g.POST("/smuggler/import", a.smugglerImport)
	g.POST("/smuggler/validate-options", a.smugglerValidate)
}

func (a *API) smugglerServices() smuggler.Services {
	return smuggler.ClusterServices{Cluster: a.Cluster, Indexes: a.Indexes, Subs: a.Subscriptions}
}

// smugglerOptions reads an export's options: a JSON body (the clients), a
// form field DownloadOptions (the studio's form, the generated curl line;
// URL-encoded or not), or nothing (the defaults).
func smugglerOptions(c echo.Context) (smuggler.Options, error) {
	b, err := readBody(c, maxSmugglerOptions, "the smuggler options")
	if err != nil {
		return smuggler.Options{}, err
	}
	ct, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	raw := strings.TrimSpace(string(b))
	if ct == "application/x-www-form-urlencoded" || strings.HasPrefix(raw, "DownloadOptions=") {
		v := strings.TrimPrefix(raw, "DownloadOptions=")
		// curl --data DownloadOptions='{…}' sends the JSON as is; a browser
		// form URL-encodes it. Decode only what is encoded.
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			if d, err := url.QueryUnescape(v); err == nil {
				v = d
			}
		} else if vals, err := url.ParseQuery(raw); err == nil && strings.HasPrefix(strings.TrimSpace(vals.Get("DownloadOptions")), "{") && strings.Contains(raw, "%") {
			v = vals.Get("DownloadOptions")
		}
		raw = v
	}
	return smuggler.ParseOptions([]byte(raw))
}

func smugglerOperationID(c echo.Context) (int64, error) {
	s := c.QueryParam("operationId")
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, dberr.New(dberr.BadRequest, "operationId %q is not an operation id", s)
	}
	return id, nil
}

// dumpFileName is the Content-Disposition name: the options' FileName, or
// "Dump of <db> <date>", as RavenDB's studio names it.
func dumpFileName(o smuggler.Options, db string, now time.Time) string {
	name := strings.TrimSpace(o.FileName)
	if name == "" {
		name = fmt.Sprintf("Dump of %s %s", db, now.UTC().Format("2006-01-02 15-04"))
	}
	name = strings.TrimSuffix(name, ".ravendbdump")
	return name + ".ravendbdump"
}

// smugglerExport is POST /databases/{db}/smuggler/export: the response is
// the dump, streamed as it is read (constant memory), while an operation
// (the given operationId, or a new one) counts it; the operation is
// Completed when the stream ends and stays readable afterwards.
func (a *API) smugglerExport(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	o, err := smugglerOptions(c)
	if err != nil {
		return err
	}
	id, err := smugglerOperationID(c)
	if err != nil {
		return err
	}
	name := dumpFileName(o, db.Name(), time.Now())
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	res := smuggler.NewResult(time.Now())
	reqCtx := c.Request().Context()
	done := make(chan error, 1)
	_, err = a.Operations.Start(db.Name(), id, smuggler.KindExport, "export of "+db.Name(), true, func(ctx context.Context, p *operations.Progress) (any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(reqCtx, cancel) // the client went away
		defer stop()
		err := smuggler.Export(ctx, db, a.smugglerServices(), o, &progressWriter{w: w, p: p, res: res}, res)
		done <- err
		if err != nil {
			return nil, err
		}
		return res.Snapshot(), nil
	})
	if err != nil {
		return err
	}
	err = <-done
	if err != nil && !w.Committed {
		return err
	}
	if err != nil {
		// Headers went out: the stream is cut, which the client sees as a
		// broken download; the operation says why.
		a.Log.Warn("export failed part way", "database", db.Name(), "err", err)
	}
	return nil
}

// progressWriter writes the dump to the response and publishes the
// counters at most every 200 ms.
type progressWriter struct {
	w    *echo.Response
	p    *operations.Progress
	res  *smuggler.Result
	last time.Time
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	if !pw.w.Committed {
		pw.w.WriteHeader(http.StatusOK)
	}
	n, err := pw.w.Write(b)
	if now := time.Now(); now.Sub(pw.last) > 200*time.Millisecond {
		pw.last = now
		pw.p.Set(pw.res.Snapshot())
	}
	return n, err
}

// smugglerImport is POST /databases/{db}/smuggler/import: multipart/form-data
// with the options part (importOptions, no file name) first and the dump as
// the first part that has a file name, whatever its field name (the npm
// client says "name", the studio "file"). The dump is read as it arrives;
// the answer, after the import ends, is the SmugglerResult.
func (a *API) smugglerImport(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	ct, params, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	if ct != "multipart/form-data" || params["boundary"] == "" {
		return dberr.New(dberr.BadRequest, "This endpoint requires form content type: multipart/form-data with an importOptions part and the dump as a file part")
	}
	id, err := smugglerOperationID(c)
	if err != nil {
		return err
	}
	// The body's bytes read are the import's position (the studio's
	// progress bar): the dump is nearly all of it.
	res := smuggler.NewResult(time.Now())
	mr := multipart.NewReader(res.Track(c.Request().Body, c.Request().ContentLength), params["boundary"])
	var o smuggler.Options
	var file *multipart.Part
	for file == nil {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return dberr.New(dberr.BadRequest, "the import request has no file part (a part with a file name holding the .ravendbdump)")
		}
		if err != nil {
			return dberr.New(dberr.BadRequest, "the import request is not valid multipart: %v", err)
		}
		if part.FileName() != "" {
			file = part
			break
		}
		if part.FormName() == "importOptions" {
			b, err := io.ReadAll(io.LimitReader(part, maxSmugglerOptions+1))
			if err != nil {
				return dberr.New(dberr.BadRequest, "reading importOptions: %v", err)
			}
			if len(b) > maxSmugglerOptions {
				return dberr.New(dberr.BadRequest, "importOptions over %d bytes", maxSmugglerOptions)
			}
			if o, err = smuggler.ParseOptions(b); err != nil {
				return err
			}
		}
	}
	if err := o.Check(); err != nil {
		return err
	}
	snap, err := a.runImport(c.Request().Context(), db, id, o, file, res, "import into "+db.Name())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, snap)
}

// runImport runs an import as an operation and waits for it.
func (a *API) runImport(reqCtx context.Context, db *storage.DB, id int64, o smuggler.Options, r io.Reader, res *smuggler.Result, what string) (map[string]any, error) {
	done := make(chan error, 1)
	_, err := a.Operations.Start(db.Name(), id, smuggler.KindImport, what, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(reqCtx, cancel)
		defer stop()
		unpublish := smuggler.Publish(ctx, p, res.Snapshot)
		// A failed import keeps its counters (what was imported before the
		// error) in the operation's progress.
		defer func() { unpublish(); p.Set(res.Snapshot()) }()
		// Spooled and checked whole first: a damaged compressed dump
		// imports nothing (dump.Verify).
		err := smuggler.ImportSpooled(ctx, db, a.smugglerServices(), o, r, dump.Limits{MaxItem: int(min(a.MaxDocumentSize+1<<20, 1<<30))}, res)
		done <- err
		if err != nil {
			return nil, importError(err)
		}
		return res.Snapshot(), nil
	})
	if err != nil {
		return nil, err
	}
	if err := <-done; err != nil {
		return nil, importError(err)
	}
	return res.Snapshot(), nil
}

// importError makes a dump that cannot be read a 400 that says where.
func importError(err error) error {
	var fe *dump.FormatError
	var ie *smuggler.ItemError
	var de *dump.DamagedError
	if errors.As(err, &de) {
		return dberr.New(dberr.BadRequest, "%v", err)
	}
	if errors.As(err, &fe) || errors.As(err, &ie) {
		return dberr.New(dberr.BadRequest, "%v (what was read before this point is imported)", err)
	}
	return err
}

// smugglerValidate is POST /smuggler/validate-options: 204 when the options
// (and their transform script) are good, a 400 saying why otherwise.
func (a *API) smugglerValidate(c echo.Context) error {
	o, err := smugglerOptions(c)
	if err != nil {
		return err
	}
	if err := o.CheckScript(); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) registerSmugglerAdmin(e *echo.Echo, g *echo.Group) {
	g.GET("/admin/smuggler/import", a.smugglerImportFile)
	e.POST("/admin/smuggler/export-dir", a.smugglerExportDir)
	e.POST("/admin/smuggler/import-dir", a.smugglerImportDir)
}

// smugglerImportFile is GET /databases/{db}/admin/smuggler/import?file=:
// a dump on the server's disk, below --dump-dir.
func (a *API) smugglerImportFile(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	path, err := smuggler.DumpPath(a.DumpDir, c.QueryParam("file"))
	if err != nil {
		return err
	}
	if c.QueryParam("file") == "" {
		return dberr.New(dberr.BadRequest, "Query string parameter 'file' is required: a dump below the server's dump directory")
	}
	id, err := smugglerOperationID(c)
	if err != nil {
		return err
	}
	o, err := smuggler.ParseOptions(nil)
	if err != nil {
		return err
	}
	f, err := openDump(path)
	if err != nil {
		return err
	}
	defer f.Close()
	res := smuggler.NewResult(time.Now())
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	snap, err := a.runImport(c.Request().Context(), db, id, o, res.Track(f, size), res, "import of "+c.QueryParam("file")+" into "+db.Name())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, snap)
}

func openDump(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "the dump file: %v", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, dberr.New(dberr.BadRequest, "the dump %s is not a file", filepath.Base(path))
	}
	return f, nil
}

// dirRequest is the body of export-dir and import-dir.
type dirRequest struct {
	// Directory below --dump-dir ("" for the dump directory itself).
	Directory string
	// Databases to export or import; empty for all (every database of
	// this node, or every dump of the directory).
	Databases []string
	// Options of each export or import (DatabaseSmugglerOptions).
	Options json.RawMessage
}

func (a *API) readDirRequest(c echo.Context) (dirRequest, string, smuggler.Options, error) {
	var req dirRequest
	if err := readJSON(c, maxSmugglerOptions, &req, "the request"); err != nil {
		return req, "", smuggler.Options{}, err
	}
	dir, err := smuggler.DumpPath(a.DumpDir, req.Directory)
	if err != nil {
		return req, "", smuggler.Options{}, err
	}
	o, err := smuggler.ParseOptions(req.Options)
	return req, dir, o, err
}

// smugglerExportDir is POST /admin/smuggler/export-dir: every database of
// this node, or the ones named, each to <dir>/<name>.ravendbdump, as one
// server operation; the answer names it at once.
func (a *API) smugglerExportDir(c echo.Context) error {
	req, dir, o, err := a.readDirRequest(c)
	if err != nil {
		return err
	}
	names := req.Databases
	if len(names) == 0 {
		names = a.Catalog.Names()
	}
	var dbs []*storage.DB
	for _, n := range names {
		db, err := a.Catalog.Get(n)
		if err != nil {
			return err
		}
		dbs = append(dbs, db)
	}
	id, err := smuggler.StartExportDir(a.Operations, dbs, a.smugglerServices(), o, dir, orDefault(req.Directory, "the dump directory"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"OperationId": id, "OperationNodeTag": a.NodeTag})
}

// smugglerImportDir is POST /admin/smuggler/import-dir: each
// <name>.ravendbdump of the directory (or the ones named) into the database
// of that name, created when missing, as one server operation.
func (a *API) smugglerImportDir(c echo.Context) error {
	req, dir, o, err := a.readDirRequest(c)
	if err != nil {
		return err
	}
	files, err := smuggler.DirEntries(dir)
	if err != nil {
		return err
	}
	if len(req.Databases) > 0 {
		chosen := map[string]string{}
		for _, n := range req.Databases {
			f, ok := files[n]
			if !ok {
				return dberr.New(dberr.BadRequest, "no %s%s in %s", n, smuggler.Ext, orDefault(req.Directory, "the dump directory"))
			}
			chosen[n] = f
		}
		files = chosen
	}
	if len(files) == 0 {
		return dberr.New(dberr.BadRequest, "no %s file in %s", smuggler.Ext, orDefault(req.Directory, "the dump directory"))
	}
	lim := dump.Limits{MaxItem: int(min(a.MaxDocumentSize+1<<20, 1<<30))}
	open := func(name string) (*storage.DB, error) {
		if db, err := a.Catalog.Get(name); err == nil {
			return db, nil
		}
		d := cluster.Database{Name: name, Members: a.membersFor(1)}
		if err := a.Catalog.CreateInCluster(context.Background(), a.Cluster, d, a.NodeTag); err != nil {
			return nil, err
		}
		return a.Catalog.Get(name)
	}
	id, err := smuggler.StartImportDir(a.Operations, files, open, a.smugglerServices(), o, lim, orDefault(req.Directory, "the dump directory"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"OperationId": id, "OperationNodeTag": a.NodeTag})
}
