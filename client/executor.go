package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ClientVersion is sent as Raven-Client-Version on every request.
const ClientVersion = "7.2.2"

// ServerNode is one node of a database topology.
type ServerNode struct {
	URL        string `json:"Url"`
	ClusterTag string `json:"ClusterTag"`
	Database   string `json:"Database"`
	ServerRole string `json:"ServerRole"`
}

// Topology is the list of nodes serving a database, as last fetched from
// the server (GET /topology), or the store's URLs when none was fetched.
type Topology struct {
	Etag  int64        `json:"Etag"`
	Nodes []ServerNode `json:"Nodes"`
}

// RequestExecutor sends HTTP requests for one database (or, for server-wide
// operations, for no database) to the nodes of its topology. It fetches the
// topology on first use, fails over to the next node on network errors,
// 408, 410, 425 and 5xx, and keeps an HTTP cache for GET requests. A 401 or
// 403 (*AuthorizationError) is not a node failure: it is returned at once.
type RequestExecutor struct {
	database    string // "" for the server-wide executor
	initialURLs []string
	conv        *Conventions
	http        *http.Client
	ownsHTTP    bool
	cache       *httpCache
	appID       string

	topoMu  sync.Mutex // serialises topology fetches
	topo    atomic.Pointer[topologyState]
	refresh atomic.Bool // a response carried Refresh-Topology

	requests        atomic.Int64
	notModified     atomic.Int64
	topologyFetches atomic.Int64
	failovers       atomic.Int64
}

type topologyState struct {
	etag       int64
	nodes      []ServerNode // topology nodes, then store URLs the topology does not list
	fromServer bool         // false: a fallback built from the store's URLs
	at         time.Time
	preferred  atomic.Int32 // index of the node tried first
}

func newRequestExecutor(database string, urls []string, conv *Conventions) *RequestExecutor {
	e := &RequestExecutor{
		database:    database,
		initialURLs: urls,
		conv:        conv,
		cache:       newHTTPCache(conv.MaxHTTPCacheSize),
		appID:       newUUID(),
	}
	if conv.HTTPClient != nil {
		e.http = conv.HTTPClient
	} else {
		e.ownsHTTP = true
		e.http = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			TLSClientConfig:     httpsTLSConfig(conv),
		}}
	}
	if database == "" || conv.DisableTopologyUpdates {
		e.topo.Store(e.fallbackState(true))
	}
	return e
}

// fallbackState is a topology made of the store's URLs.
func (e *RequestExecutor) fallbackState(final bool) *topologyState {
	st := &topologyState{fromServer: final, at: time.Now()}
	for _, u := range e.initialURLs {
		st.nodes = append(st.nodes, ServerNode{URL: u, ClusterTag: "!", Database: e.database})
	}
	return st
}

// RequestCount is the number of HTTP requests sent so far, counting every
// attempt on every node (topology fetches included).
func (e *RequestExecutor) RequestCount() int64 { return e.requests.Load() }

// NotModifiedCount is the number of responses served from the HTTP cache
// after the server answered 304 Not Modified.
func (e *RequestExecutor) NotModifiedCount() int64 { return e.notModified.Load() }

// TopologyFetchCount is the number of GET /topology requests sent.
func (e *RequestExecutor) TopologyFetchCount() int64 { return e.topologyFetches.Load() }

// FailoverCount is the number of requests that succeeded on another node
// than the one tried first.
func (e *RequestExecutor) FailoverCount() int64 { return e.failovers.Load() }

// CacheStats returns the number of entries in the HTTP cache and their size.
func (e *RequestExecutor) CacheStats() (entries int, bytes int64) { return e.cache.stats() }

// Topology returns the nodes currently used, in the order they are tried
// (the preferred node first).
func (e *RequestExecutor) Topology() Topology {
	st := e.topo.Load()
	if st == nil {
		return Topology{}
	}
	n := len(st.nodes)
	out := Topology{Etag: st.etag, Nodes: make([]ServerNode, 0, n)}
	p := int(st.preferred.Load())
	for i := range n {
		out.Nodes = append(out.Nodes, st.nodes[(p+i)%n])
	}
	return out
}

// request is one logical request; it may be sent to several nodes.
type request struct {
	method    string
	path      string // below /databases/<db> when dbScoped, else from the server root
	query     string // encoded, without '?'
	body      []byte // sent as application/json when non-nil
	dbScoped  bool
	cacheable bool
	ifMatch   *string // an expected change vector (If-Match)
}

type response struct {
	status    int
	body      []byte
	header    http.Header
	fromCache bool
}

// Do sends a request to the database's nodes, with failover. pathAndQuery is
// relative to /databases/<db> (e.g. "/docs?id=x"), or to the server root if
// the executor is server-wide. A non-nil body is sent as JSON. It returns the
// status and body of the response; 404 is not an error, other statuses ≥ 400
// are returned as errors (see ServerError).
func (e *RequestExecutor) Do(ctx context.Context, method, pathAndQuery string, body []byte) (int, []byte, error) {
	path, query, _ := strings.Cut(pathAndQuery, "?")
	resp, err := e.execute(ctx, &request{
		method: method, path: path, query: query, body: body,
		dbScoped: e.database != "", cacheable: method == http.MethodGet,
	})
	if err != nil {
		return 0, nil, err
	}
	return resp.status, resp.body, nil
}

// execute sends r to the preferred node, then to the others in turn until
// one answers with something other than a failover status.
func (e *RequestExecutor) execute(ctx context.Context, r *request) (*response, error) {
	resp, _, err := tryNodes(ctx, e, r, nil,
		func(_ int, url string) (*response, error) { return e.attempt(ctx, r, url) },
		func(resp *response) int { return resp.status },
		func(resp *response) *response { return resp })
	return resp, err
}

// tryNodes is the failover loop of execute and stream. After the topology
// check of a database-scoped request it tries r on the nodes in turn from
// the preferred one: no answer or a failover status moves on to the next
// node, any other answer ends the loop (and makes a later node the
// preferred one); a status >= 400 other than 404 is returned as an error.
// When every node failed the error is the database's absence if a node
// said so, the one error, or an AllNodesFailedError.
//
// more, when not nil, is asked before every node after the first, and a
// false ends the loop there. try sends r to one node's URL (attempt counts
// the nodes tried before it) and returns the answer, an error only when
// none came; status is an answer's status, and failed the answer whose
// status is an error as a *response for the error (closing what it must).
// It returns the answer and the URL that gave it.
func tryNodes[T any](ctx context.Context, e *RequestExecutor, r *request, more func() bool,
	try func(attempt int, url string) (T, error), status func(T) int, failed func(T) *response) (T, string, error) {
	var none T
	if r.dbScoped {
		if err := e.ensureTopology(ctx); err != nil {
			return none, "", err
		}
		if e.refresh.CompareAndSwap(true, false) {
			e.refreshTopology(ctx)
		}
	}
	st := e.topo.Load()
	n := len(st.nodes)
	if n == 0 {
		return none, "", errors.New("rookery: no server URLs")
	}
	start := int(st.preferred.Load())
	var errs []error
	var missing *DatabaseDoesNotExistError
	for i := range n {
		if err := ctx.Err(); err != nil {
			return none, "", err
		}
		if i > 0 && more != nil && !more() {
			break
		}
		idx := (start + i) % n
		node := st.nodes[idx]
		url := e.buildURL(node, r)
		ans, err := try(i, url)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if failoverStatus(status(ans)) {
			resp := failed(ans)
			ferr := errorFromResponse(e.database, r.method, url, resp.status, resp.header, resp.body)
			if dm, ok := ferr.(*DatabaseDoesNotExistError); ok {
				missing = dm
			}
			errs = append(errs, ferr)
			continue
		}
		if i > 0 {
			e.failovers.Add(1)
			st.preferred.Store(int32(idx))
		}
		if code := status(ans); code >= 400 && code != http.StatusNotFound {
			return none, "", e.errorFrom(r.method, url, failed(ans))
		}
		return ans, url, nil
	}
	if missing != nil {
		return none, "", missing
	}
	if len(errs) == 1 {
		return none, "", errs[0]
	}
	return none, "", &AllNodesFailedError{Method: r.method, Path: r.path, Errors: errs}
}

func failoverStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusGone, http.StatusTooEarly:
		return true
	}
	return status >= 500
}

func (e *RequestExecutor) buildURL(node ServerNode, r *request) string {
	var b strings.Builder
	b.Grow(len(node.URL) + len(node.Database) + len(r.path) + len(r.query) + 12)
	b.WriteString(node.URL)
	if r.dbScoped {
		b.WriteString("/databases/")
		b.WriteString(node.Database)
	}
	b.WriteString(r.path)
	if r.query != "" {
		b.WriteByte('?')
		b.WriteString(r.query)
	}
	return b.String()
}

// attempt sends r to one URL. It returns an error only when no HTTP
// response was received.
func (e *RequestExecutor) attempt(ctx context.Context, r *request, url string) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, e.conv.RequestTimeout)
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Raven-Client-Version", ClientVersion)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.ifMatch != nil {
		req.Header.Set("If-Match", `"`+*r.ifMatch+`"`)
	}
	if r.dbScoped {
		etag := int64(0)
		if st := e.topo.Load(); st != nil {
			etag = st.etag
		}
		req.Header.Set("Topology-Etag", `"`+strconv.FormatInt(etag, 10)+`"`)
	}
	var cachedEtag string
	var cachedBody []byte
	var cached bool
	if r.cacheable {
		if cachedEtag, cachedBody, cached = e.cache.get(url); cached {
			req.Header.Set("If-None-Match", `"`+cachedEtag+`"`)
		}
	}
	began := time.Now()
	e.requests.Add(1)
	hr, err := e.http.Do(req)
	if err != nil {
		e.observe(r.method, url, 0, false, err, began)
		return nil, fmt.Errorf("rookery: %s %s: %w", r.method, url, err)
	}
	data, err := io.ReadAll(hr.Body)
	hr.Body.Close()
	if err != nil {
		e.observe(r.method, url, hr.StatusCode, false, err, began)
		return nil, fmt.Errorf("rookery: %s %s: reading response: %w", r.method, url, err)
	}
	if hr.Header.Get("Refresh-Topology") != "" && r.dbScoped {
		e.refresh.Store(true)
	}
	resp := &response{status: hr.StatusCode, body: data, header: hr.Header}
	if r.cacheable {
		switch {
		case hr.StatusCode == http.StatusNotModified && cached:
			resp.fromCache = true
			if cachedEtag == notFoundEtag {
				resp.status, resp.body = http.StatusNotFound, nil
			} else {
				resp.status, resp.body = http.StatusOK, cachedBody
			}
			e.notModified.Add(1)
		case hr.StatusCode == http.StatusNotFound:
			e.cache.put(url, notFoundEtag, nil)
		case hr.StatusCode >= 200 && hr.StatusCode < 300:
			if etag := strings.Trim(hr.Header.Get("ETag"), `"`); etag != "" {
				e.cache.put(url, etag, data)
			} else if cached {
				e.cache.remove(url)
			}
		}
	}
	e.observe(r.method, url, hr.StatusCode, resp.fromCache, nil, began)
	return resp, nil
}

func (e *RequestExecutor) observe(method, url string, status int, fromCache bool, err error, began time.Time) {
	if f := e.conv.OnRequest; f != nil {
		f(RequestEvent{Method: method, URL: url, StatusCode: status, FromCache: fromCache, Err: err, Duration: time.Since(began)})
	}
}

// topologyRetryInterval is how long a fallback topology (no node answered)
// is used before the next request tries to fetch the topology again.
const topologyRetryInterval = time.Second

// ensureTopology fetches the topology on first use. Requests wait for it.
func (e *RequestExecutor) ensureTopology(ctx context.Context) error {
	if st := e.topo.Load(); st != nil && (st.fromServer || time.Since(st.at) < topologyRetryInterval) {
		return nil
	}
	e.topoMu.Lock()
	defer e.topoMu.Unlock()
	if st := e.topo.Load(); st != nil && (st.fromServer || time.Since(st.at) < topologyRetryInterval) {
		return nil
	}
	urls := e.initialURLs
	if st := e.topo.Load(); st != nil {
		urls = nodeURLs(st)
	}
	err := e.fetchTopology(ctx, urls, "first-topology-update", true)
	if err != nil {
		if sameOnEveryNode(err) || ctx.Err() != nil {
			return err
		}
		// No node answered: use the store's URLs; requests will fail or
		// succeed on their own, and the fetch is tried again later.
		prev := e.topo.Load()
		fb := e.fallbackState(false)
		if prev != nil {
			fb.etag = prev.etag
		}
		e.topo.Store(fb)
	}
	return nil
}

// refreshTopology fetches the topology again after a Refresh-Topology
// header. Failures keep the current topology.
func (e *RequestExecutor) refreshTopology(ctx context.Context) {
	e.topoMu.Lock()
	defer e.topoMu.Unlock()
	st := e.topo.Load()
	if st == nil {
		return
	}
	_ = e.fetchTopology(ctx, nodeURLs(st), "refresh-topology-header", false)
}

// nodeURLs lists the URLs of st, preferred node first.
func nodeURLs(st *topologyState) []string {
	n := len(st.nodes)
	p := int(st.preferred.Load())
	urls := make([]string, 0, n)
	for i := range n {
		urls = append(urls, st.nodes[(p+i)%n].URL)
	}
	return urls
}

// fetchTopology asks each url in turn for the database topology and installs
// the first answer. It stops at once when the database does not exist.
// Called with topoMu held.
func (e *RequestExecutor) fetchTopology(ctx context.Context, urls []string, debugTag string, force bool) error {
	var errs []error
	for _, base := range urls {
		if err := ctx.Err(); err != nil {
			return err
		}
		url := base + "/topology?name=" + e.database + "&" + debugTag + "&applicationIdentifier=" + e.appID
		e.topologyFetches.Add(1)
		resp, err := e.attempt(ctx, &request{method: http.MethodGet, dbScoped: true}, url)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.status != http.StatusOK {
			ferr := e.errorFrom(http.MethodGet, url, resp)
			if sameOnEveryNode(ferr) {
				return ferr
			}
			errs = append(errs, ferr)
			continue
		}
		var t Topology
		if err := json.Unmarshal(resp.body, &t); err != nil || len(t.Nodes) == 0 {
			errs = append(errs, fmt.Errorf("rookery: GET %s: unusable topology: %s", url, truncate(resp.body, 200)))
			continue
		}
		e.installTopology(t, force)
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return &AllNodesFailedError{Method: http.MethodGet, Path: "/topology", Errors: errs}
}

// installTopology replaces the node list with t (plus the store's URLs that t
// does not list, as a last resort), keeping the preferred node when it is
// still there.
func (e *RequestExecutor) installTopology(t Topology, force bool) {
	prev := e.topo.Load()
	if !force && prev != nil && prev.fromServer && t.Etag < prev.etag {
		return
	}
	st := &topologyState{etag: t.Etag, fromServer: true, at: time.Now()}
	seen := map[string]bool{}
	for _, n := range t.Nodes {
		n.URL = strings.TrimRight(n.URL, "/")
		if n.Database == "" {
			n.Database = e.database
		}
		if n.URL == "" || seen[n.URL] {
			continue
		}
		seen[n.URL] = true
		st.nodes = append(st.nodes, n)
	}
	for _, u := range e.initialURLs {
		if !seen[u] {
			seen[u] = true
			st.nodes = append(st.nodes, ServerNode{URL: u, ClusterTag: "!", Database: e.database})
		}
	}
	if prev != nil && len(prev.nodes) > 0 {
		want := prev.nodes[int(prev.preferred.Load())%len(prev.nodes)].URL
		for i, n := range st.nodes {
			if n.URL == want && prev.fromServer {
				st.preferred.Store(int32(i))
			}
		}
	}
	e.topo.Store(st)
}

// errorFrom maps a failed response to an error; an authorization refusal
// says when the store has no certificate to present.
func (e *RequestExecutor) errorFrom(method, url string, resp *response) error {
	err := errorFromResponse(e.database, method, url, resp.status, resp.header, resp.body)
	if ae, ok := err.(*AuthorizationError); ok && e.ownsHTTP && e.conv.Certificate == nil && strings.HasPrefix(url, "https:") {
		ae.NoCertificate = true
	}
	return err
}

func (e *RequestExecutor) close() {
	if e.ownsHTTP {
		e.http.CloseIdleConnections()
	}
}

// sameOnEveryNode tells an error every node would answer alike (the
// database is missing, or this certificate may not use it): asking another
// node is pointless.
func sameOnEveryNode(err error) bool {
	var dm *DatabaseDoesNotExistError
	return errors.As(err, &dm) || errors.Is(err, ErrAuthorization)
}
