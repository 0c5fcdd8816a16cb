package studio

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The revisions page of a document: its revisions, newest first, a line
// comparison of two of them, and a revert to one (a POST form).

const (
	revisionsPageSize = 50
	// revisionDiffMaxLines bounds each side of a comparison (the diff is
	// quadratic in lines); larger revisions are not compared.
	revisionDiffMaxLines = 2000
	// revisionDiffMaxBytes bounds the bodies read for a comparison.
	revisionDiffMaxBytes = 1 << 20
)

func (s *Studio) registerRevisions(g *echo.Group) {
	g.GET("/revisions", s.revisionsPage)
	g.POST("/revisions/revert", s.revisionsRevert)
}

// revisionsPage serves GET /studio/db/{db}/revisions?id=…[&start=][&a=&b=].
func (s *Studio) revisionsPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id := c.QueryParam("id")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The address has no id."))
	}
	start, _ := strconv.Atoi(c.QueryParam("start"))
	start = max(0, min(start, 1<<30))
	ctx := c.Request().Context()
	list, total, err := db.RevisionsFor(ctx, id, start, revisionsPageSize, 1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	p := views.RevisionsPageData{DB: db.Name(), ID: id, Total: total, Start: start, PageSize: revisionsPageSize,
		A: c.QueryParam("a"), B: c.QueryParam("b")}
	cur, err := db.GetPrefix(ctx, id, 1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	coll := ""
	if cur != nil {
		p.ID, p.Exists, coll = cur.ID, true, cur.Collection
	} else if len(list) > 0 {
		p.ID, coll = list[0].ID, list[0].Collection
	}
	p.Configured = db.RevisionsConfig().For(coll) != nil
	for _, r := range list {
		p.Rows = append(p.Rows, views.RevisionRow{ChangeVector: r.ChangeVector, LastModified: r.LastModified, Flags: r.Flags.String(),
			Deleted: r.Flags&storage.RevisionDelete != 0, Size: r.Size, Current: cur != nil && cur.ChangeVector == r.ChangeVector})
	}
	if p.A != "" && p.B != "" {
		p.Diff, p.DiffNote, err = s.revisionDiff(c, db, p.ID, p.A, p.B)
		if err != nil {
			return s.studioError(c, db.Name(), err)
		}
	}
	return render(c, http.StatusOK, s.chrome(c, p.ID+" · Revisions", db.Name(), views.NavDocuments, ""), views.RevisionsPage(p))
}

// revisionDiff compares two revisions of id line by line.
func (s *Studio) revisionDiff(c echo.Context, db *storage.DB, id, a, b string) ([]views.RevisionDiffLine, string, error) {
	ctx := c.Request().Context()
	var sides [2][]string
	for i, cv := range []string{a, b} {
		r, err := db.RevisionByChangeVector(ctx, cv)
		if err != nil {
			return nil, "", err
		}
		if r == nil || !strings.EqualFold(r.ID, id) {
			return nil, "The revision " + cv + " of " + id + " does not exist (any more); nothing to compare.", nil
		}
		if len(r.Body) > revisionDiffMaxBytes {
			return nil, "These revisions are too large to compare here.", nil
		}
		text := "(deleted)"
		if r.Flags&storage.RevisionDelete == 0 {
			text = docPretty(r.Body)
		}
		sides[i] = strings.Split(text, "\n")
		if len(sides[i]) > revisionDiffMaxLines {
			return nil, "These revisions are too long to compare here (" + strconv.Itoa(revisionDiffMaxLines) + " lines at most).", nil
		}
	}
	d := lineDiff(sides[0], sides[1])
	if a == b {
		return d, "A and B are the same revision.", nil
	}
	return d, "", nil
}

// lineDiff is a longest-common-subsequence line diff of a and b.
func lineDiff(a, b []string) []views.RevisionDiffLine {
	n, m := len(a), len(b)
	// lcs[i][j]: the LCS length of a[i:] and b[j:], in one flat slice.
	lcs := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			v := max(at(i+1, j), at(i, j+1))
			if a[i] == b[j] {
				v = at(i+1, j+1) + 1
			}
			lcs[i*(m+1)+j] = v
		}
	}
	var out []views.RevisionDiffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, views.RevisionDiffLine{Op: "=", Text: a[i]})
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			out = append(out, views.RevisionDiffLine{Op: "-", Text: a[i]})
			i++
		default:
			out = append(out, views.RevisionDiffLine{Op: "+", Text: b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, views.RevisionDiffLine{Op: "-", Text: a[i]})
	}
	for ; j < m; j++ {
		out = append(out, views.RevisionDiffLine{Op: "+", Text: b[j]})
	}
	return out
}

// revisionsRevert serves POST /studio/db/{db}/revisions/revert (id, cv):
// the document becomes that revision again.
func (s *Studio) revisionsRevert(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id, cv := c.FormValue("id"), c.FormValue("cv")
	back := string(views.RevisionsURL(db.Name(), id))
	if id == "" || cv == "" {
		return redirectFlash(c, back, "Which revision? The form names no document or change vector; nothing was reverted.", true)
	}
	var info storage.Info
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("studio")
		var err error
		info, err = tx.RevertTo(id, cv)
		return err
	})
	if err != nil {
		return redirectFlash(c, back, "Not reverted: "+err.Error(), true)
	}
	if info.Etag == 0 || info.ChangeVector == "" {
		return redirectFlash(c, back, "Reverted "+id+" to the revision "+cv+": the document is deleted.", false)
	}
	return redirectFlash(c, string(views.DocURL(db.Name(), info.ID)), "Reverted "+info.ID+" to the revision "+cv+"; it is now the current document.", false)
}
