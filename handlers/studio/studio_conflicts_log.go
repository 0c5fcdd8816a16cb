package studio

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// The resolution log, cluster-wide. Each node logs the resolutions it
// made (automatic ones on arrival, and the writes of people and bulk
// operations) in its own database file; the log is not replicated. The
// page gathers every member's log (this node's from its file, the others'
// from GET /internal/conflicts/log with this node's credentials), merges
// them newest first, marks every row with the node that resolved it, and
// names a node that did not answer. Gathering rather than replicating the
// log: the log keeps every losing body, so replicating it would double
// the conflict traffic, and automatic resolutions happen on every copy,
// so a replicated log would hold each of them once per node.

const (
	logPageSize = 25
	// logPeerTimeout bounds how long the page waits for the other nodes
	// (asked concurrently).
	logPeerTimeout = 2 * time.Second
	// logMaxBody bounds a node's answer (a page of entries with bodies).
	logMaxBody = 32 << 20
)

func logFilter(q url.Values) views.LogFilter {
	return views.LogFilter{
		ID: strings.TrimSpace(q.Get("id")), Prefix: q.Get("prefix"), Collection: strings.TrimSpace(q.Get("collection")),
		Strategy: strings.TrimSpace(q.Get("strategy")), By: strings.TrimSpace(q.Get("by")), Node: strings.ToUpper(strings.TrimSpace(q.Get("node"))),
	}
}

func logQuery(f views.LogFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"id": f.ID, "prefix": f.Prefix, "collection": f.Collection, "strategy": f.Strategy, "by": f.By, "node": f.Node} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func logVersion(i int, v storage.LoggedVersion) views.LogVersion {
	lv := views.LogVersion{Index: i, ChangeVector: v.ChangeVector, LastModified: v.LastModified, Tombstone: v.Tombstone, Nodes: cvNodes(v.ChangeVector)}
	if !v.Tombstone {
		lv.JSON = docPretty(v.Body)
	}
	return lv
}

// sameVersion tells whether a logged version is what the resolution kept.
func sameVersion(v, result storage.LoggedVersion) bool {
	if v.Tombstone || result.Tombstone {
		return v.Tombstone == result.Tombstone
	}
	return canonJSON(v.Body) == canonJSON(result.Body)
}

// nodeLog is one node's GET /internal/conflicts/log answer.
type nodeLog struct {
	Node         string
	TotalResults int
	Results      []storage.ResolutionEntry
}

// parseLogCursor reads the page cursor: per node, the sequence number its
// entries continue before ("A.120,B.45").
func parseLogCursor(raw string) (map[string]int64, error) {
	out := map[string]int64{}
	if raw == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(raw, ",") {
		tag, seq, ok := strings.Cut(part, ".")
		n, err := strconv.ParseInt(seq, 10, 64)
		if !ok || err != nil || n <= 0 || tag == "" || len(tag) > 8 {
			return nil, dberr.New(dberr.BadRequest, "The page cursor %q is not a list of NODE.SEQ.", raw)
		}
		out[strings.ToUpper(tag)] = n
	}
	return out, nil
}

func formatLogCursor(c map[string]int64) string {
	var parts []string
	for tag, seq := range c {
		parts = append(parts, tag+"."+strconv.FormatInt(seq, 10))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// logNodes are the nodes whose logs the page gathers: the database's
// members (a node that left may still hold a log, but is not asked), this
// node first.
func (s *Studio) logNodes(db string) []views.LogNode {
	urls := map[string]string{}
	if s.Cluster != nil {
		for _, n := range s.Cluster.Nodes() {
			urls[n.Tag] = n.URL
		}
	}
	out := []views.LogNode{{Tag: s.NodeTag, Self: true}}
	members := slices.Clone(s.members(db))
	sort.Strings(members)
	for _, m := range members {
		if m != s.NodeTag {
			out = append(out, views.LogNode{Tag: m, URL: urls[m]})
		}
	}
	return out
}

func (s *Studio) fetchNodeLog(ctx context.Context, base, db string, f storage.ResolutionFilter, n int) (nodeLog, error) {
	var out nodeLog
	ctx, cancel := context.WithTimeout(ctx, logPeerTimeout)
	defer cancel()
	q := url.Values{"db": {db}, "pageSize": {strconv.Itoa(n)}}
	for k, v := range map[string]string{"id": f.ID, "prefix": f.Prefix, "collection": f.Collection, "strategy": f.Strategy, "by": f.By} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.BeforeSeq > 0 {
		q.Set("before", strconv.FormatInt(f.BeforeSeq, 10))
	}
	err := httpx.GetJSON(ctx, s.peers(), strings.TrimRight(base, "/")+"/internal/conflicts/log?"+q.Encode(), logMaxBody, &out)
	return out, err
}

type taggedEntry struct {
	node string
	e    storage.ResolutionEntry
}

// gatherLog reads one page of the merged log of every member: each node
// is asked for its next logPageSize+1 entries after its cursor, the
// answers are merged newest first, and the page's cursor moves each node
// past the entries of it that the page shows.
func (s *Studio) gatherLog(ctx context.Context, db *storage.DB, filter views.LogFilter, cursor map[string]int64) ([]taggedEntry, []views.LogNode, bool, error) {
	nodes := s.logNodes(db.Name())
	f := storage.ResolutionFilter{ID: filter.ID, Prefix: filter.Prefix, Collection: filter.Collection, Strategy: filter.Strategy, By: filter.By}
	lists := make([][]storage.ResolutionEntry, len(nodes))
	var wg sync.WaitGroup
	var localErr error
	for i := range nodes {
		n := &nodes[i]
		if filter.Node != "" && n.Tag != filter.Node {
			n.Skipped = true
			continue
		}
		nf := f
		nf.BeforeSeq = cursor[n.Tag]
		if n.Self {
			list, total, err := db.Resolutions(ctx, nf, logPageSize+1)
			if err != nil {
				localErr = err
				continue
			}
			lists[i], n.Total, n.Answered = list, total, true
			continue
		}
		if n.URL == "" {
			n.Problem = "no URL known yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.fetchNodeLog(ctx, n.URL, db.Name(), nf, logPageSize+1)
			if err != nil {
				n.Problem = err.Error()
				return
			}
			lists[i], n.Total, n.Answered = got.Results, got.TotalResults, true
			if len(lists[i]) > logPageSize+1 {
				lists[i] = lists[i][:logPageSize+1]
			}
		}()
	}
	wg.Wait()
	if localErr != nil {
		return nil, nodes, false, localErr
	}
	var all []taggedEntry
	for i, list := range lists {
		for _, e := range list {
			if e.Node == "" {
				e.Node = nodes[i].Tag
			}
			all = append(all, taggedEntry{node: nodes[i].Tag, e: e})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if !a.e.At.Equal(b.e.At) {
			return a.e.At.After(b.e.At)
		}
		if a.node != b.node {
			return a.node < b.node
		}
		return a.e.Seq > b.e.Seq
	})
	more := len(all) > logPageSize
	if more {
		all = all[:logPageSize]
	}
	return all, nodes, more, nil
}

// conflictLog serves GET /studio/db/{db}/conflicts/log: every member's
// resolutions, newest first, each marked with the node that resolved it.
func (s *Studio) conflictLog(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	q := c.QueryParams()
	p := views.LogPageData{DB: db.Name(), Filter: logFilter(q), Self: s.NodeTag}
	cursor, err := parseLogCursor(q.Get("before"))
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	p.Open = q.Get("open")
	entries, nodes, more, err := s.gatherLog(c.Request().Context(), db, p.Filter, cursor)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	p.Nodes, p.Paged = nodes, len(cursor) > 0
	for _, n := range nodes {
		p.Total += n.Total
	}
	next := map[string]int64{}
	for tag, seq := range cursor {
		next[tag] = seq
	}
	for _, te := range entries {
		e := te.e
		en := views.LogEntry{Seq: e.Seq, Key: te.node + "." + strconv.FormatInt(e.Seq, 10), From: te.node, ID: e.ID, Collection: e.Collection, At: e.At,
			Strategy: e.Strategy, By: e.By, Node: e.Node, Result: logVersion(-1, e.Result)}
		for i, v := range e.Versions {
			lv := logVersion(i, v)
			lv.Kept = sameVersion(v, e.Result)
			en.Versions = append(en.Versions, lv)
		}
		p.Entries = append(p.Entries, en)
		next[te.node] = e.Seq
	}
	if p.Paged {
		p.First = views.DBURLQ(db.Name(), "conflicts/log", logQuery(p.Filter))
	}
	if more {
		nq := logQuery(p.Filter)
		nq.Set("before", formatLogCursor(next))
		p.Next = views.DBURLQ(db.Name(), "conflicts/log", nq)
	}
	ch := s.chrome(c, "Resolution log · "+db.Name(), db.Name(), views.NavConflicts, "")
	return render(c, http.StatusOK, ch, views.ConflictLogPage(p))
}

// conflictRestore serves POST /studio/db/{db}/conflicts/log/restore: one
// click on a log row writes that logged version back as the current
// document. An entry of another node's log is restored by that node (it
// holds the entry), asked with this node's credentials; the write
// replicates here like any other.
func (s *Studio) conflictRestore(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	logURL := string(views.DBURL(db.Name(), "conflicts/log"))
	seq, err := strconv.ParseInt(c.FormValue("seq"), 10, 64)
	if err != nil {
		return redirectFlash(c, logURL, "Which entry? The form has no log sequence number; nothing was restored.", true)
	}
	version, err := strconv.Atoi(c.FormValue("version"))
	if err != nil {
		return redirectFlash(c, logURL, "Which version? The form does not say; nothing was restored.", true)
	}
	node := strings.ToUpper(strings.TrimSpace(c.FormValue("node")))
	if node != "" && node != s.NodeTag {
		return s.restoreOnNode(c, db, node, seq, version)
	}
	e, err := db.Resolution(c.Request().Context(), seq)
	if err != nil {
		return redirectFlash(c, logURL, err.Error(), true)
	}
	key := s.NodeTag + "." + strconv.FormatInt(seq, 10)
	back := string(views.DBURLQ(db.Name(), "conflicts/log", url.Values{"id": {e.ID}, "open": {key}})) + "#entry-" + key
	info, err := conflicts.RestoreVersion(c.Request().Context(), db, seq, version, "studio restore")
	if err != nil {
		return redirectFlash(c, back, "Not restored: "+err.Error(), true)
	}
	if e.Versions[version].Tombstone {
		return redirectFlash(c, back, fmt.Sprintf("Restored version %d of %s from log entry %s: the document is deleted.", version+1, e.ID, key), false)
	}
	msg := fmt.Sprintf("Restored version %d of %s from log entry %s; it is now the current document.", version+1, e.ID, key)
	return redirectFlash(c, string(views.DocURL(db.Name(), info.ID)), msg, false)
}

// restoreOnNode asks node to restore version of its log entry seq.
func (s *Studio) restoreOnNode(c echo.Context, db *storage.DB, node string, seq int64, version int) error {
	key := node + "." + strconv.FormatInt(seq, 10)
	back := string(views.DBURLQ(db.Name(), "conflicts/log", url.Values{"open": {key}})) + "#entry-" + key
	var base string
	for _, n := range s.logNodes(db.Name()) {
		if n.Tag == node {
			base = n.URL
		}
	}
	if base == "" {
		return redirectFlash(c, back, "Not restored: node "+node+" is not a member of "+db.Name()+" with a known address.", true)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	u := strings.TrimRight(base, "/") + "/databases/" + url.PathEscape(db.Name()) + "/conflicts/log/" + strconv.FormatInt(seq, 10) + "/restore?version=" + strconv.Itoa(version)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return redirectFlash(c, back, "Not restored: "+err.Error(), true)
	}
	resp, err := s.peers().Do(req)
	if err != nil {
		return redirectFlash(c, back, "Not restored: node "+node+" is unreachable ("+err.Error()+").", true)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return redirectFlash(c, back, "Not restored: node "+node+" said "+httpx.ErrorText(resp.Body), true)
	}
	return redirectFlash(c, back, fmt.Sprintf("Restored version %d from log entry %s on node %s; the write replicates to every copy.", version+1, key, node), false)
}
