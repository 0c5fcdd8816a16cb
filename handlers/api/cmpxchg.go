package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/storage"
)

// DefaultMaxCmpXchgValueSize is --max-cmpxchg-value-size's default.
const DefaultMaxCmpXchgValueSize = cluster.DefaultMaxCmpXchgValueSize

// clusterTxWait bounds how long a cluster-wide batch waits for this node
// to write its committed documents before answering.
const clusterTxWait = 10 * time.Second

func (a *API) maxCmpXchgValue() int64 {
	return cluster.MaxCmpXchgValue(a.MaxCmpXchgValueSize)
}

func (a *API) cmpXchgCluster() (*cluster.Cluster, error) {
	if a.Cluster == nil {
		return nil, dberr.New(dberr.Unavailable, "compare exchange needs the cluster, which this node does not run")
	}
	return a.Cluster, nil
}

// appendCmpXchgValue writes {"Key","Index","Value"}.
func appendCmpXchgValue(buf []byte, v cluster.CmpXchgValue) []byte {
	buf = append(buf, `{"Key":`...)
	buf = document.AppendString(buf, v.Key)
	buf = append(buf, `,"Index":`...)
	buf = strconv.AppendUint(buf, v.Index, 10)
	buf = append(buf, `,"Value":`...)
	if len(v.Value) == 0 {
		buf = append(buf, `null`...)
	} else {
		buf = append(buf, v.Value...)
	}
	return append(buf, '}')
}

// getCmpXchg serves GET /databases/{db}/cmpxchg: by key (key=, repeated)
// or by prefix (startsWith=, start=, pageSize=).
func (a *API) getCmpXchg(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	cl, err := a.cmpXchgCluster()
	if err != nil {
		return err
	}
	q := c.QueryParams()
	var out []cluster.CmpXchgValue
	if keys := q["key"]; len(keys) > 0 {
		if len(keys) > 1024 {
			return dberr.New(dberr.BadRequest, "at most 1024 keys in one request")
		}
		for _, k := range keys {
			if err := cluster.ValidCmpXchgKey(k); err != nil {
				return err
			}
			if v, ok := cl.CmpXchg(db.Name(), k); ok {
				out = append(out, v)
			}
		}
	} else {
		start, err := cmpxchgInt(c, "start", 0, 0, 1<<31)
		if err != nil {
			return err
		}
		pageSize, err := cmpxchgInt(c, "pageSize", 1024, 1, 1<<20)
		if err != nil {
			return err
		}
		prefix := c.QueryParam("startsWith")
		if len(prefix) > cluster.MaxCmpXchgKeyBytes {
			return dberr.New(dberr.BadRequest, "startsWith is longer than a key can be")
		}
		all := cl.CmpXchgList(db.Name(), prefix)
		if start < len(all) {
			out = all[start:min(len(all), start+pageSize)]
		}
	}
	buf := append(make([]byte, 0, 256), `{"Results":[`...)
	for i, v := range out {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCmpXchgValue(buf, v)
	}
	buf = append(buf, "]}"...)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

func cmpxchgInt(c echo.Context, name string, def, lo, hi int) (int, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, dberr.New(dberr.BadRequest, "%s must be an integer from %d to %d, not %q", name, lo, hi, s)
	}
	return v, nil
}

func indexParam(c echo.Context) (uint64, error) {
	s := c.QueryParam("index")
	if s == "" {
		return 0, dberr.New(dberr.BadRequest, "the index query parameter is required (0 for a new key)")
	}
	v, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, dberr.New(dberr.BadRequest, "index must be a non-negative integer, not %q", s)
	}
	return v, nil
}

func writeCmpXchgResult(c echo.Context, r cluster.CmpXchgResult) error {
	buf := append(make([]byte, 0, 128), `{"Successful":`...)
	buf = strconv.AppendBool(buf, r.Successful)
	buf = append(buf, `,"Index":`...)
	buf = strconv.AppendUint(buf, r.Index, 10)
	buf = append(buf, `,"Value":`...)
	if len(r.Value) == 0 {
		buf = append(buf, `null`...)
	} else {
		buf = append(buf, r.Value...)
	}
	buf = append(buf, '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

// putCmpXchg serves PUT /databases/{db}/cmpxchg?key=&index=, body
// {"Object": value, "@metadata"?}.
func (a *API) putCmpXchg(c echo.Context) error {
	db, key, err := a.dbParam(c, "key")
	if err != nil {
		return err
	}
	cl, err := a.cmpXchgCluster()
	if err != nil {
		return err
	}
	if err := cluster.ValidCmpXchgKey(key); err != nil {
		return err
	}
	index, err := indexParam(c)
	if err != nil {
		return err
	}
	body, err := readBody(c, a.maxCmpXchgValue(), "compare exchange value")
	if err != nil {
		return err
	}
	if err := cluster.CheckCmpXchgValue(body, a.maxCmpXchgValue()); err != nil {
		return err
	}
	r, err := cl.PutCmpXchg(c.Request().Context(), db.Name(), key, index, body, c.QueryParam("raft-request-id"))
	if err != nil {
		return err
	}
	return writeCmpXchgResult(c, r)
}

// deleteCmpXchg serves DELETE /databases/{db}/cmpxchg?key=&index=.
func (a *API) deleteCmpXchg(c echo.Context) error {
	db, key, err := a.dbParam(c, "key")
	if err != nil {
		return err
	}
	cl, err := a.cmpXchgCluster()
	if err != nil {
		return err
	}
	if err := cluster.ValidCmpXchgKey(key); err != nil {
		return err
	}
	index, err := indexParam(c)
	if err != nil {
		return err
	}
	r, err := cl.DeleteCmpXchg(c.Request().Context(), db.Name(), key, index, c.QueryParam("raft-request-id"))
	if err != nil {
		return err
	}
	return writeCmpXchgResult(c, r)
}

// guardIndex is the atomic-guard index a session saw for a document: the
// RAFT entry of the change vector it loaded (0 when none).
func guardIndex(dbName string, cvs ...*string) uint64 {
	for _, cv := range cvs {
		if cv == nil || *cv == "" {
			continue
		}
		v, err := changevector.Parse(*cv)
		if err != nil {
			continue
		}
		id := cluster.ClusterTxDBID(dbName)
		for _, e := range v {
			if e.Tag == cluster.ClusterTxTag && e.DBID == id {
				return uint64(e.Etag)
			}
		}
		return 0
	}
	return 0
}

// cmpXchgValueOf turns a batch command's parsed Document into the stored
// value JSON (the parsed form's empty metadata is left out).
func cmpXchgValueOf(p document.Parsed) []byte {
	b := p.Body
	if s := string(b); strings.HasSuffix(s, `,"@metadata":{}}`) {
		b = append(append([]byte(nil), b[:len(b)-len(`,"@metadata":{}}`)]...), '}')
	}
	return b
}

// clusterBulkDocs runs a cluster-wide batch: one log entry with its
// compare-exchange writes and documents, checked together when applied.
func (a *API) clusterBulkDocs(c echo.Context, db *storage.DB, cmds []batch.Command) error {
	cl, err := a.cmpXchgCluster()
	if err != nil {
		return err
	}
	if a.ClusterTx == nil {
		return dberr.New(dberr.Unavailable, "cluster-wide transactions are not available on this node")
	}
	name := db.Name()
	tx := cluster.CmpXchgCommand{RequestID: c.QueryParam("raft-request-id"), Time: time.Now().UTC(), NoGuards: c.QueryParam("disableAtomicDocumentWrites") == "true"}
	if len(tx.RequestID) > 128 {
		return dberr.New(dberr.BadRequest, "raft-request-id is at most 128 bytes")
	}
	sep := db.Separator()
	for i, cmd := range cmds {
		switch cmd.Type {
		case batch.Put, batch.Delete:
			if strings.TrimSpace(cmd.ID) == "" || strings.HasSuffix(cmd.ID, "|") || strings.HasSuffix(cmd.ID, sep) {
				return dberr.New(dberr.BadRequest, "command %d: a cluster-wide transaction needs complete document ids, not %q", i, cmd.ID)
			}
			if err := storage.ValidateID(cmd.ID); err != nil {
				return err
			}
			d := cluster.TxDoc{ID: cmd.ID, Delete: cmd.Type == batch.Delete, Guard: guardIndex(name, cmd.OriginalChangeVector, cmd.ChangeVector)}
			if !d.Delete {
				d.Collection, d.Body = cmd.Document.Collection, cmd.Document.Body
			}
			tx.Docs = append(tx.Docs, d)
		case batch.CmpXchgPut:
			v := cmpXchgValueOf(cmd.Document)
			if int64(len(v)) > a.maxCmpXchgValue() {
				return dberr.New(dberr.TooLarge, "command %d: the compare exchange value of '%s' is %d bytes; at most %d (--max-cmpxchg-value-size)", i, cmd.ID, len(v), a.maxCmpXchgValue())
			}
			tx.Ops = append(tx.Ops, cluster.CmpXchgOp{Key: cmd.ID, Index: uint64(cmd.Index), Value: v})
		case batch.CmpXchgDelete:
			tx.Ops = append(tx.Ops, cluster.CmpXchgOp{Key: cmd.ID, Index: uint64(cmd.Index), Delete: true})
		default:
			return dberr.New(dberr.BadRequest, "command %d: %s is not supported in a cluster-wide transaction", i, cmd.Type)
		}
	}
	r, err := cl.ClusterTransaction(c.Request().Context(), name, tx)
	if err != nil {
		return err
	}
	index := uint64(r.Value)
	if len(tx.Docs) > 0 {
		ctx, cancel := context.WithTimeout(c.Request().Context(), clusterTxWait)
		err := a.ClusterTx.Wait(ctx, name, index)
		cancel()
		if err != nil {
			return err
		}
	}
	buf := append(make([]byte, 0, 64+len(cmds)*160), `{"Results":[`...)
	for i, cmd := range cmds {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch cmd.Type {
		case batch.Put:
			res := batch.Result{Type: batch.Put, ID: cmd.ID, Collection: cmd.Document.Collection, LastModified: tx.Time}
			if d, err := db.Get(c.Request().Context(), cmd.ID); err == nil && d != nil {
				res.ID, res.Collection, res.ChangeVector, res.LastModified = d.ID, d.Collection, d.ChangeVector, d.LastModified
			}
			buf = appendResult(buf, res)
		case batch.Delete:
			buf = appendResult(buf, batch.Result{Type: batch.Delete, ID: cmd.ID, Deleted: true})
		default:
			buf = append(buf, `{"Type":`...)
			buf = document.AppendString(buf, cmd.Type)
			buf = append(buf, `,"Key":`...)
			buf = document.AppendString(buf, cmd.ID)
			buf = append(buf, `,"Index":`...)
			buf = strconv.AppendUint(buf, index, 10)
			buf = append(buf, '}')
		}
	}
	buf = append(buf, `],"TransactionIndex":`...)
	buf = strconv.AppendUint(buf, index, 10)
	buf = append(buf, '}')
	return c.Blob(http.StatusCreated, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

// maxCmpXchgIncludePaths bounds the cmpxchg= parameters of one load, and
// maxCmpXchgIncludePathBytes the length of each.
const (
	maxCmpXchgIncludePaths     = 1024
	maxCmpXchgIncludePathBytes = 1024
)

// checkCmpXchgIncludePaths checks the cmpxchg= parameters of a load (the
// npm client's includeCompareExchangeValue(path)): document field paths
// whose values are compare-exchange keys.
func checkCmpXchgIncludePaths(paths []string) error {
	if len(paths) > maxCmpXchgIncludePaths {
		return dberr.New(dberr.BadRequest, "more than %d cmpxchg include paths", maxCmpXchgIncludePaths)
	}
	for _, p := range paths {
		if strings.TrimSpace(p) == "" || len(p) > maxCmpXchgIncludePathBytes {
			return dberr.New(dberr.BadRequest, "a cmpxchg include path is a document field path of 1 to %d bytes, not %q", maxCmpXchgIncludePathBytes, names.Clip(p, 80))
		}
	}
	return nil
}

// addCmpXchgKeys adds the compare-exchange keys a loaded document's parsed
// body holds at the cmpxchg= paths.
func addCmpXchgKeys(inc *query.CmpXchgIncludes, body any, paths []string) error {
	for _, p := range paths {
		for _, k := range valuesAt(body, strings.Split(p, ".")) {
			if err := inc.Add(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// cmpXchgIncludesJSON is the object of a load's CompareExchangeValueIncludes
// (query.CmpXchgIncludes: a missing key has Index -1 and a null Value).
func cmpXchgIncludesJSON(db *storage.DB, cl *cluster.Cluster, inc *query.CmpXchgIncludes) []byte {
	return inc.AppendJSON(nil, func(key string) (query.CmpXchgValue, bool) {
		if cluster.ValidCmpXchgKey(key) != nil {
			return query.CmpXchgValue{}, false
		}
		v, ok := cl.CmpXchg(db.Name(), key)
		return query.CmpXchgValue{Key: v.Key, Index: v.Index, Value: v.Value}, ok
	})
}
