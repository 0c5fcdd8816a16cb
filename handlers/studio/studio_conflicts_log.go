package studio

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

const logPageSize = 25

func logFilter(q url.Values) views.LogFilter {
	return views.LogFilter{
		ID: strings.TrimSpace(q.Get("id")), Prefix: q.Get("prefix"), Collection: strings.TrimSpace(q.Get("collection")),
		Strategy: strings.TrimSpace(q.Get("strategy")), By: strings.TrimSpace(q.Get("by")),
	}
}

func logQuery(f views.LogFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"id": f.ID, "prefix": f.Prefix, "collection": f.Collection, "strategy": f.Strategy, "by": f.By} {
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

// conflictLog serves GET /studio/db/{db}/conflicts/log: newest first,
// keyset-paged by sequence number.
func (s *Studio) conflictLog(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	q := c.QueryParams()
	p := views.LogPageData{DB: db.Name(), Filter: logFilter(q)}
	var before int64
	if b := q.Get("before"); b != "" {
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The page cursor %q is not a log sequence number.", b))
		}
	}
	p.Open, _ = strconv.ParseInt(q.Get("open"), 10, 64)
	f := storage.ResolutionFilter{ID: p.Filter.ID, Prefix: p.Filter.Prefix, Collection: p.Filter.Collection, Strategy: p.Filter.Strategy, By: p.Filter.By, BeforeSeq: before}
	list, total, err := db.Resolutions(c.Request().Context(), f, logPageSize+1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	p.Total, p.Paged = total, before > 0
	more := len(list) > logPageSize
	if more {
		list = list[:logPageSize]
	}
	for _, e := range list {
		en := views.LogEntry{Seq: e.Seq, ID: e.ID, Collection: e.Collection, At: e.At, Strategy: e.Strategy, By: e.By, Node: e.Node, Result: logVersion(-1, e.Result)}
		for i, v := range e.Versions {
			lv := logVersion(i, v)
			lv.Kept = sameVersion(v, e.Result)
			en.Versions = append(en.Versions, lv)
		}
		p.Entries = append(p.Entries, en)
	}
	if p.Paged {
		p.First = views.DBURLQ(db.Name(), "conflicts/log", logQuery(p.Filter))
	}
	if more {
		next := logQuery(p.Filter)
		next.Set("before", strconv.FormatInt(list[len(list)-1].Seq, 10))
		p.Next = views.DBURLQ(db.Name(), "conflicts/log", next)
	}
	ch := s.chrome(c, "Resolution log · "+db.Name(), db.Name(), views.NavConflicts, "")
	return render(c, http.StatusOK, ch, views.ConflictLogPage(p))
}

// conflictRestore serves POST /studio/db/{db}/conflicts/log/restore: a
// logged version written back as the current document, once confirmed.
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
	e, err := db.Resolution(c.Request().Context(), seq)
	if err != nil {
		return redirectFlash(c, logURL, err.Error(), true)
	}
	back := string(views.DBURLQ(db.Name(), "conflicts/log", url.Values{"id": {e.ID}, "open": {strconv.FormatInt(seq, 10)}})) + "#entry-" + strconv.FormatInt(seq, 10)
	if c.FormValue("confirm") != "yes" {
		return redirectFlash(c, back, "Tick the confirmation to restore; nothing was restored.", true)
	}
	info, err := conflicts.RestoreVersion(c.Request().Context(), db, seq, version, "studio restore")
	if err != nil {
		return redirectFlash(c, back, "Not restored: "+err.Error(), true)
	}
	msg := fmt.Sprintf("Restored version %d of %s from log entry %d; it is now the current document.", version+1, e.ID, seq)
	if e.Versions[version].Tombstone {
		return redirectFlash(c, back, fmt.Sprintf("Restored version %d of %s from log entry %d: the document is deleted.", version+1, e.ID, seq), false)
	}
	return redirectFlash(c, string(views.DocURL(db.Name(), info.ID)), msg, false)
}
