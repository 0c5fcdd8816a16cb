package api

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Time series: GET /timeseries (one range), GET /timeseries/ranges (several
// series and ranges of one document), GET /timeseries/stats and POST
// /timeseries (TimeSeriesBatchOperation). Appends and deletes through the
// session come in bulk_docs (backend/batch).

func (a *API) registerTimeSeries(g *echo.Group) {
	g.GET("/timeseries", a.getTimeSeries)
	g.POST("/timeseries", a.postTimeSeries)
	g.GET("/timeseries/ranges", a.getTimeSeriesRanges)
	g.GET("/timeseries/stats", a.getTimeSeriesStats)
}

// Dates RavenDB writes for open range ends (DateTime.MinValue/MaxValue).
const (
	tsMinDate = "0001-01-01T00:00:00.0000000Z"
	tsMaxDate = "9999-12-31T23:59:59.9999999Z"
)

func tsBound(s string, open int64) (int64, error) {
	if s == "" {
		return open, nil
	}
	return batch.ParseTSTime(s)
}

func appendTSDate(b []byte, ms int64) []byte {
	switch ms {
	case storage.TSMin:
		return append(b, tsMinDate...)
	case storage.TSMax:
		return append(b, tsMaxDate...)
	}
	return storage.TSTime(ms).AppendFormat(b, document.TimeFormat)
}

// tsPaging reads start and pageSize (pageSize -1: all).
func tsPaging(c echo.Context) (start, pageSize int, err error) {
	pageSize = -1
	if s := c.QueryParam("start"); s != "" {
		if start, err = strconv.Atoi(s); err != nil || start < 0 {
			return 0, 0, badParam("start", s)
		}
	}
	if s := c.QueryParam("pageSize"); s != "" {
		if pageSize, err = strconv.Atoi(s); err != nil || pageSize < 0 {
			return 0, 0, badParam("pageSize", s)
		}
		if pageSize >= math.MaxInt32 {
			pageSize = -1
		}
	}
	return start, pageSize, nil
}

// writeTSRange writes one range result object. It reports false when the
// series has no entries at all (RavenDB answers 404 then).
func writeTSRange(w *bufio.Writer, r *storage.TSReader, id, name string, from, to int64, start, pageSize int, prefix []byte) (bool, error) {
	all, err := r.Count(id, name, storage.TSMin, storage.TSMax)
	if err != nil || all == 0 {
		return false, err
	}
	if spelled, err := r.SeriesName(id, name); err != nil {
		return false, err
	} else if spelled != "" {
		name = spelled
	}
	total, err := r.Count(id, name, from, to)
	if err != nil {
		return false, err
	}
	buf := make([]byte, 0, 4096)
	buf = append(buf, prefix...)
	buf = append(buf, `{"Name":`...)
	buf = document.AppendString(buf, name)
	buf = append(buf, `,"From":"`...)
	buf = appendTSDate(buf, from)
	buf = append(buf, `","To":"`...)
	buf = appendTSDate(buf, to)
	buf = append(buf, `","TotalResults":`...)
	buf = strconv.AppendInt(buf, total, 10)
	buf = append(buf, `,"Entries":[`...)
	first := true
	err = r.Range(id, name, from, to, start, pageSize, func(e *storage.TSEntry) error {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, `{"Timestamp":"`...)
		buf = appendTSDate(buf, e.Timestamp)
		buf = append(buf, `","Tag":`...)
		if e.Tag == nil {
			buf = append(buf, "null"...)
		} else {
			buf = document.AppendString(buf, *e.Tag)
		}
		buf = append(buf, `,"Values":[`...)
		for i, v := range e.Values {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendFloat(buf, v, 'g', -1, 64)
		}
		buf = append(buf, `],"IsRollup":false}`...)
		if len(buf) >= 32<<10 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		return nil
	})
	if err != nil {
		return true, err
	}
	buf = append(buf, "]}"...)
	_, err = w.Write(buf)
	return true, err
}

// getTimeSeries serves GET /timeseries?docId=&name=&from=&to=&start=&pageSize=
// (GetTimeSeriesOperation, session.timeSeriesFor(...).get): 404 when the
// document or the series does not exist.
func (a *API) getTimeSeries(c echo.Context) error {
	db, id, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	from, err := tsBound(c.QueryParam("from"), storage.TSMin)
	if err != nil {
		return err
	}
	to, err := tsBound(c.QueryParam("to"), storage.TSMax)
	if err != nil {
		return err
	}
	start, pageSize, err := tsPaging(c)
	if err != nil {
		return err
	}
	r, err := db.ReadTimeSeries(c.Request().Context())
	if err != nil {
		return err
	}
	defer r.Close()
	if did, err := r.DocumentID(id); err != nil {
		return err
	} else if did == "" {
		return c.NoContent(http.StatusNotFound)
	}
	if n, err := r.Count(id, name, storage.TSMin, storage.TSMax); err != nil {
		return err
	} else if n == 0 {
		return c.NoContent(http.StatusNotFound)
	}
	resp := c.Response()
	resp.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSONCharsetUTF8)
	resp.WriteHeader(http.StatusOK)
	w := bufio.NewWriterSize(resp, 64<<10)
	if _, err := writeTSRange(w, r, id, name, from, to, start, pageSize, nil); err != nil {
		return nil // the status is sent; the client sees a cut body
	}
	return w.Flush()
}

// getTimeSeriesRanges serves GET /timeseries/ranges?docId=&name=&from=&to=
// (the name/from/to triple repeated; GetMultipleTimeSeriesOperation):
// {"Id":…,"Values":{name:[range,…]}}.
func (a *API) getTimeSeriesRanges(c echo.Context) error {
	db, id, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	names, froms, tos := q["name"], q["from"], q["to"]
	if len(names) == 0 {
		return dberr.New(dberr.BadRequest, "Query string parameter 'name' is required")
	}
	if len(froms) != len(names) || len(tos) != len(names) {
		return dberr.New(dberr.BadRequest, "Each 'name' needs a 'from' and a 'to' (empty for an open end)")
	}
	type rng struct {
		name     string
		from, to int64
	}
	var order []string
	byName := map[string][]rng{}
	for i, n := range names {
		if n == "" {
			return dberr.New(dberr.BadRequest, "Query string parameter 'name' cannot be empty")
		}
		f, err := tsBound(froms[i], storage.TSMin)
		if err != nil {
			return err
		}
		t, err := tsBound(tos[i], storage.TSMax)
		if err != nil {
			return err
		}
		if _, ok := byName[n]; !ok {
			order = append(order, n)
		}
		byName[n] = append(byName[n], rng{n, f, t})
	}
	start, pageSize, err := tsPaging(c)
	if err != nil {
		return err
	}
	r, err := db.ReadTimeSeries(c.Request().Context())
	if err != nil {
		return err
	}
	defer r.Close()
	did, err := r.DocumentID(id)
	if err != nil {
		return err
	}
	if did == "" {
		return c.NoContent(http.StatusNotFound)
	}
	resp := c.Response()
	resp.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSONCharsetUTF8)
	resp.WriteHeader(http.StatusOK)
	w := bufio.NewWriterSize(resp, 64<<10)
	head := document.AppendString([]byte(`{"Id":`), did)
	head = append(head, `,"Values":{`...)
	w.Write(head)
	firstName := true
	for _, n := range order {
		var b []byte
		if !firstName {
			b = append(b, ',')
		}
		b = document.AppendString(b, n)
		b = append(b, ":["...)
		firstRange := true
		wrote := false
		for _, g := range byName[n] {
			prefix := b
			if !firstRange {
				prefix = []byte{','}
			}
			ok, err := writeTSRange(w, r, id, g.name, g.from, g.to, start, pageSize, prefix)
			if err != nil {
				return nil
			}
			if ok {
				firstRange, wrote = false, true
				b = nil
			}
		}
		if wrote {
			w.WriteString("]")
			firstName = false
		}
	}
	w.WriteString("}}")
	return w.Flush()
}

// getTimeSeriesStats serves GET /timeseries/stats?docId=
// (GetTimeSeriesStatisticsOperation).
func (a *API) getTimeSeriesStats(c echo.Context) error {
	db, id, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	r, err := db.ReadTimeSeries(c.Request().Context())
	if err != nil {
		return err
	}
	defer r.Close()
	did, err := r.DocumentID(id)
	if err != nil {
		return err
	}
	if did == "" {
		return c.NoContent(http.StatusNotFound)
	}
	stats, err := r.Stats(id)
	if err != nil {
		return err
	}
	type item struct {
		Name            string
		NumberOfEntries int64
		StartDate       string
		EndDate         string
	}
	out := struct {
		DocumentId string
		TimeSeries []item
	}{DocumentId: did, TimeSeries: []item{}}
	for _, s := range stats {
		out.TimeSeries = append(out.TimeSeries, item{s.Name, s.Entries,
			storage.TSTime(s.Start).Format(document.TimeFormat), storage.TSTime(s.End).Format(document.TimeFormat)})
	}
	return writeJSON(c, http.StatusOK, out)
}

// postTimeSeries serves POST /timeseries?docId= (TimeSeriesBatchOperation):
// one series' appends and deletes, 204.
func (a *API) postTimeSeries(c echo.Context) error {
	db, id, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(c.Request().Body) // bounded by the server's body limit
	if err != nil {
		return err
	}
	var body batch.TSBody
	if err := json.Unmarshal(raw, &body); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid time series operation: %v", err)
	}
	op, err := body.Op()
	if err != nil {
		return err
	}
	if err := db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		return tx.TimeSeries(id, op)
	}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
