package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// DefaultMaxMultiGet bounds the inner requests of one multi_get.
const DefaultMaxMultiGet = 1024

// registerPatch adds single-document patches, multi_get (the session's
// lazy operations) and the detailed statistics.
func (a *API) registerPatch(e *echo.Echo, g *echo.Group) {
	a.router = e
	g.PATCH("/docs", a.patchDoc)
	g.POST("/multi_get", a.multiGet)
	g.GET("/stats/detailed", a.detailedStats)
}

// getRequest is one inner request of a multi_get.
type getRequest struct {
	URL     string            `json:"Url"`
	Query   string            `json:"Query"`
	Method  string            `json:"Method"`
	Headers map[string]string `json:"Headers"`
	Content json.RawMessage   `json:"Content"`
}

// multiGetRecorder collects an inner request's answer.
type multiGetRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *multiGetRecorder) Header() http.Header { return r.header }

func (r *multiGetRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *multiGetRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// multiGetBodyLimit bounds a multi_get's body.
func (a *API) multiGetBodyLimit() int64 {
	if a.MaxDocumentSize > 0 {
		return max(4*a.MaxDocumentSize, 64<<20)
	}
	return 256 << 20
}

// multiGet serves POST /multi_get: the session's lazy loads and queries,
// several GET (or query POST) requests answered in one round trip. Each
// inner request goes through the whole server in-process, access rules
// included, so the caller gets exactly what each request alone would
// give them.
func (a *API) multiGet(c echo.Context) error {
	if _, err := a.db(c); err != nil {
		return err
	}
	body, err := readBody(c, a.multiGetBodyLimit(), "the multi_get request")
	if err != nil {
		return err
	}
	if err := document.CheckDepth(body); err != nil {
		return dberr.New(dberr.BadRequest, "the multi_get request: %v", err)
	}
	var in struct{ Requests []getRequest }
	if err := json.Unmarshal(body, &in); err != nil {
		return dberr.New(dberr.BadRequest, "the multi_get request must be a JSON object {Requests: [...]}: %v", err)
	}
	limit := a.MaxMultiGet
	if limit <= 0 {
		limit = DefaultMaxMultiGet
	}
	if len(in.Requests) > limit {
		return dberr.New(dberr.BadRequest, "the multi_get request has %d requests; at most %d are allowed (--max-multi-get)", len(in.Requests), limit)
	}
	prefix := "/databases/" + c.Param("db")
	reqs := make([]*http.Request, len(in.Requests))
	for i, g := range in.Requests {
		r, err := a.innerRequest(c, prefix, i, g)
		if err != nil {
			return err
		}
		reqs[i] = r
	}
	var buf bytes.Buffer
	buf.WriteString(`{"Results":[`)
	for i, r := range reqs {
		if err := c.Request().Context().Err(); err != nil {
			return err
		}
		rec := &multiGetRecorder{header: http.Header{}}
		a.router.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"Result":`)
		res := bytes.TrimSpace(rec.body.Bytes())
		switch {
		case len(res) == 0 || rec.status == http.StatusNotModified:
			buf.WriteString("null")
		case json.Valid(res):
			buf.Write(res)
		default:
			b, _ := json.Marshal(string(res))
			buf.Write(b)
		}
		buf.WriteString(`,"StatusCode":`)
		buf.WriteString(strconv.Itoa(rec.status))
		buf.WriteString(`,"Headers":`)
		hs := map[string]string{}
		for k, v := range rec.header {
			if k == "Etag" {
				k = "ETag" // the client looks it up by RavenDB's spelling
			}
			hs[k] = strings.Join(v, ", ")
		}
		b, _ := json.Marshal(hs)
		buf.Write(b)
		buf.WriteByte('}')
	}
	buf.WriteString("]}")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf.Bytes())
}

// innerRequest builds the i-th inner request of a multi_get: a GET or POST
// on the same database, never another multi_get, carrying the caller's
// connection (certificate, address) and headers.
func (a *API) innerRequest(c echo.Context, prefix string, i int, g getRequest) (*http.Request, error) {
	u := g.URL
	if !strings.HasPrefix(u, "/databases/") {
		u = prefix + "/" + strings.TrimPrefix(u, "/")
	}
	if u != prefix && !strings.HasPrefix(u, prefix+"/") {
		return nil, dberr.New(dberr.BadRequest, "multi_get request %d: %q is not on database %s", i, g.URL, c.Param("db"))
	}
	if strings.ContainsAny(u, "?#\\") || path.Clean(u) != u {
		return nil, dberr.New(dberr.BadRequest, "multi_get request %d: %q is not a clean path (give the query string in Query)", i, g.URL)
	}
	if strings.HasSuffix(u, "/multi_get") {
		return nil, dberr.New(dberr.BadRequest, "multi_get request %d: a multi_get cannot contain another multi_get", i)
	}
	method := strings.ToUpper(g.Method)
	if method == "" {
		method = http.MethodGet
	}
	if method != http.MethodGet && method != http.MethodPost {
		return nil, dberr.New(dberr.BadRequest, "multi_get request %d: method %q is not allowed (GET or POST)", i, g.Method)
	}
	var body io.Reader = http.NoBody
	content := bytes.TrimSpace(g.Content)
	if len(content) > 0 && string(content) != "null" {
		if content[0] == '"' {
			var s string
			if err := json.Unmarshal(content, &s); err != nil {
				return nil, dberr.New(dberr.BadRequest, "multi_get request %d: Content: %v", i, err)
			}
			content = []byte(s)
		}
		body = bytes.NewReader(content)
	}
	target := u
	if q := strings.TrimPrefix(g.Query, "?"); q != "" {
		target += "?" + q
	}
	outer := c.Request()
	r, err := http.NewRequestWithContext(outer.Context(), method, target, body)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "multi_get request %d: %v", i, err)
	}
	r.Header = outer.Header.Clone()
	r.Header.Del("Content-Length")
	r.Header.Del("If-None-Match")
	r.Header.Del("If-Match")
	for k, v := range g.Headers {
		r.Header.Set(k, v)
	}
	if len(content) > 0 {
		r.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	r.Host, r.RemoteAddr, r.TLS, r.Proto, r.ProtoMajor, r.ProtoMinor = outer.Host, outer.RemoteAddr, outer.TLS, outer.Proto, outer.ProtoMajor, outer.ProtoMinor
	return r, nil
}
