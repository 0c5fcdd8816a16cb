package studio

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/views"
)

const (
	// hiloPageLimit bounds the HiLo documents shown (one per collection
	// that clients store with HiLo ids).
	hiloPageLimit = 1024
	// hiloRecentCalls is how many calls each tag lists.
	hiloRecentCalls = 5
	// hiloSizes is how many recent range sizes show the growth.
	hiloSizes = 6
)

// registerHiLo adds the HiLo page: every Raven/Hilo/<tag> document with the
// ranges this node handed out for it. Commits wake its live region, so a
// new range shows without a reload.
func (s *Studio) registerHiLo(g *echo.Group) {
	g.GET("/hilo", s.hiloPage)
	s.addLive("hilo", s.hiloLive, false)
}

func (s *Studio) hiloData(ctx context.Context, name string) (views.HiLoData, error) {
	db, err := s.Catalog.Get(name)
	if err != nil {
		return views.HiLoData{}, err
	}
	docs, err := db.StartsWith(ctx, ids.HiLoPrefix, 0, hiloPageLimit+1)
	if err != nil {
		return views.HiLoData{}, err
	}
	d := views.HiLoData{Database: db.Name(), Separator: db.Separator()}
	if len(docs) > hiloPageLimit {
		docs, d.More = docs[:hiloPageLimit], true
	}
	now := time.Now().UTC()
	for _, doc := range docs {
		tag := doc.ID[len(ids.HiLoPrefix):]
		r := views.HiLoRow{Tag: tag, Prefix: tag + db.Separator()}
		var body struct{ Max *int64 }
		if json.Unmarshal(doc.Body, &body) == nil && body.Max != nil {
			r.Max, r.Readable = *body.Max, true
		}
		hiloHistory(&r, s.Activity.HiLoCalls(db.Name(), tag), now)
		for _, n := range db.IDNumbers(r.Prefix) {
			r.Docs += n.Docs
			r.MaxID = max(r.MaxID, n.MaxN)
		}
		d.Rows = append(d.Rows, r)
	}
	return d, nil
}

// hiloHistory fills a row from the node's recent calls for its tag (newest
// first): the last range, the last few calls, the recent range sizes and
// where they are heading.
func hiloHistory(r *views.HiLoRow, calls []activity.HiLoCall, now time.Time) {
	r.Calls = calls[:min(len(calls), hiloRecentCalls)]
	for _, c := range calls {
		if c.Op != "next" {
			continue
		}
		if !r.HasLast {
			r.Last, r.HasLast = c, true
		}
		if len(r.Sizes) < hiloSizes {
			r.Sizes = append(r.Sizes, c.Size)
		}
	}
	slices.Reverse(r.Sizes) // oldest first
	if n := len(r.Sizes); n >= 2 {
		prev, last := r.Sizes[n-2], r.Sizes[n-1]
		switch {
		case last == 2*prev:
			r.Trend = "doubling"
		case last > prev:
			r.Trend = "growing"
		case 2*last == prev:
			r.Trend = "halving"
		case last < prev:
			r.Trend = "shrinking"
		default:
			r.Trend = "steady"
		}
	}
	if r.HasLast {
		r.NextSize = ids.Capacity(r.Last.Size, r.Last.Time, true, now)
	} else {
		r.NextSize = ids.Capacity(0, time.Time{}, false, now)
	}
}

func (s *Studio) hiloPage(c echo.Context) error {
	d, err := s.hiloData(c.Request().Context(), c.Param("db"))
	if err != nil {
		return s.studioError(c, "", err)
	}
	return render(c, http.StatusOK, s.chrome(c, "HiLo · "+d.Database, d.Database, views.NavHiLo, "hilo"), views.HiLoPage(d))
}

func (s *Studio) hiloLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	d, err := s.hiloData(ctx, q.Get("db"))
	if err != nil {
		return nil, err
	}
	return []views.Fragment{{ID: "hilo-body", C: views.HiLoBody(d)}}, nil
}
