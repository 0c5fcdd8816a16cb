package studio

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/views"
)

// registerStats adds the Stats page: a database's counters and its write
// rate, refreshed every second.
func (s *Studio) registerStats(g *echo.Group) {
	g.GET("/stats", s.statsPage)
	s.addLive("stats", s.statsLive, true)
}

// statsData gathers the page's figures. The document counts are in memory
// (no document is read), so the page costs the same at any size; the
// conflict counts read the conflicts table (one row per stored version),
// and nothing at all while the database has never held a conflict.
func (s *Studio) statsData(ctx context.Context, name string) (views.StatsData, error) {
	db, err := s.Catalog.Get(name)
	if err != nil {
		return views.StatsData{}, err
	}
	st := db.Stats()
	ids, versions, err := db.ConflictCounts(ctx)
	if err != nil {
		return views.StatsData{}, err
	}
	perColl, err := db.ConflictsPerCollection(ctx)
	if err != nil {
		return views.StatsData{}, err
	}
	d := views.StatsData{
		Database:     db.Name(),
		DatabaseID:   st.DatabaseID,
		Documents:    st.Documents + int64(ids),
		Conflicted:   int64(ids),
		Versions:     int64(versions),
		Tombstones:   st.Tombstones,
		LastEtag:     st.LastEtag,
		ChangeVector: st.ChangeVector,
		Size:         st.SizeOnDisk,
		LastWrite:    st.LastWrite,
		Series:       s.Activity.Series(db.Name(), activity.SeriesLength),
		Rate:         s.Activity.Rate(db.Name()),
	}
	d.Peak = views.MaxOf(d.Series)
	// A collection's documents include its conflicted ids; a collection
	// whose documents are all conflicted is listed too.
	for _, c := range st.Collections {
		n := perColl[strings.ToLower(c.Name)].IDs
		delete(perColl, strings.ToLower(c.Name))
		d.Collections = append(d.Collections, views.StatsCollection{Name: c.Name, Docs: c.Docs + n, Conflicted: n, Tombstones: c.Tombstones})
	}
	for _, c := range perColl {
		d.Collections = append(d.Collections, views.StatsCollection{Name: c.Name, Docs: c.IDs, Conflicted: c.IDs})
	}
	sort.Slice(d.Collections, func(i, j int) bool {
		return strings.ToLower(d.Collections[i].Name) < strings.ToLower(d.Collections[j].Name)
	})
	return d, nil
}

func (s *Studio) statsPage(c echo.Context) error {
	d, err := s.statsData(c.Request().Context(), c.Param("db"))
	if err != nil {
		return s.studioError(c, "", err)
	}
	return render(c, http.StatusOK, s.chrome(c, "Stats · "+d.Database, d.Database, views.NavStats, "stats"), views.StatsPage(d))
}

func (s *Studio) statsLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	d, err := s.statsData(ctx, q.Get("db"))
	if err != nil {
		return nil, err
	}
	return []views.Fragment{{ID: "stats-body", C: views.StatsBody(d)}}, nil
}
