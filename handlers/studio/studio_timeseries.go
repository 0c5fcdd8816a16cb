package studio

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The time-series page of a document: its series with their figures, a
// chart of one series over a chosen range (static/timeseries.js draws it
// with uPlot from /timeseries/points) and the range's first entries.

const (
	tsTableRows   = 50   // entries listed under the chart
	tsChartPoints = 1500 // points drawn at most (the range is sampled)
)

func (s *Studio) registerTimeSeries(g *echo.Group) {
	g.GET("/timeseries", s.timeSeriesPage)
	g.GET("/timeseries/points", s.timeSeriesPoints)
}

// tsTime reads a range bound from the page's form: datetime-local in UTC
// ("2026-12-07T10:30"), RFC 3339, or empty for an open end.
func tsTime(s string, open int64) (int64, error) {
	if s == "" {
		return open, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, dberr.New(dberr.BadRequest, "'%s' is not a date and time (YYYY-MM-DDTHH:MM, UTC)", s)
}

func (s *Studio) timeSeriesPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id := c.QueryParam("id")
	p := views.TSPage{DB: db.Name(), ID: id, Name: c.QueryParam("name"), From: c.QueryParam("from"), To: c.QueryParam("to")}
	from, err := tsTime(p.From, storage.TSMin)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	to, err := tsTime(p.To, storage.TSMax)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	r, err := db.ReadTimeSeries(c.Request().Context())
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	defer r.Close()
	did, err := r.DocumentID(id)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if did == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.NotFound, "There is no document %s", id))
	}
	p.ID = did
	stats, err := r.Stats(did)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	for _, st := range stats {
		p.Series = append(p.Series, views.TSSeriesRow{Name: st.Name, Entries: st.Entries, Start: storage.TSTime(st.Start), End: storage.TSTime(st.End)})
	}
	if p.Name == "" && len(stats) > 0 {
		p.Name = stats[0].Name
	}
	for _, st := range stats {
		if st.Name == p.Name || (p.Name != "" && equalFold(st.Name, p.Name)) {
			p.Current = &views.TSSeriesRow{Name: st.Name, Entries: st.Entries, Start: storage.TSTime(st.Start), End: storage.TSTime(st.End)}
		}
	}
	if p.Current != nil {
		p.Name = p.Current.Name
		if p.InRange, err = r.Count(did, p.Name, from, to); err != nil {
			return s.studioError(c, db.Name(), err)
		}
		err = r.Range(did, p.Name, from, to, 0, tsTableRows, func(e *storage.TSEntry) error {
			row := views.TSEntryRow{At: storage.TSTime(e.Timestamp), Values: append([]float64(nil), e.Values...)}
			if e.Tag != nil {
				row.Tag = *e.Tag
			}
			p.Entries = append(p.Entries, row)
			return nil
		})
		if err != nil {
			return s.studioError(c, db.Name(), err)
		}
	}
	return render(c, http.StatusOK, s.chrome(c, "Time series · "+did, db.Name(), views.NavDocuments, ""), views.TimeSeriesPage(p))
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// timeSeriesPoints serves the chart's points: {"Times":[unix ms…],
// "Series":[{"Label","Values"}…],"Sampled":bool}, at most about
// tsChartPoints of them (the first entry of each equal slice of the range).
func (s *Studio) timeSeriesPoints(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return err
	}
	id, name := c.QueryParam("id"), c.QueryParam("name")
	from, err := tsTime(c.QueryParam("from"), storage.TSMin)
	if err != nil {
		return err
	}
	to, err := tsTime(c.QueryParam("to"), storage.TSMax)
	if err != nil {
		return err
	}
	r, err := db.ReadTimeSeries(c.Request().Context())
	if err != nil {
		return err
	}
	defer r.Close()
	type series struct {
		Label  string
		Values []*float64
	}
	out := struct {
		Times   []int64
		Series  []series
		Total   int64
		Sampled bool
	}{Times: []int64{}, Series: []series{}}
	if out.Total, err = r.Count(id, name, from, to); err != nil {
		return err
	}
	out.Sampled = out.Total > tsChartPoints
	visit := func(e *storage.TSEntry) error {
		for len(out.Series) < len(e.Values) {
			s := series{Label: "Value " + strconv.Itoa(len(out.Series)+1), Values: make([]*float64, len(out.Times))}
			out.Series = append(out.Series, s)
		}
		out.Times = append(out.Times, e.Timestamp)
		for i := range out.Series {
			var v *float64
			if i < len(e.Values) {
				x := e.Values[i]
				v = &x
			}
			out.Series[i].Values = append(out.Series[i].Values, v)
		}
		return nil
	}
	if out.Sampled {
		err = r.Sample(id, name, from, to, tsChartPoints, visit)
	} else {
		err = r.Range(id, name, from, to, 0, -1, visit)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}
