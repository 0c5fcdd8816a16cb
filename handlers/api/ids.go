package api

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
)

// clientName describes the caller of a request for the studio: its address
// and, when it says, its client library.
func clientName(c echo.Context) string {
	name := c.RealIP()
	if v := c.Request().Header.Get("Raven-Client-Version"); v != "" {
		name += " (ravendb " + v + ")"
	} else if ua := c.Request().UserAgent(); strings.HasPrefix(ua, "rookery") {
		name += " (" + ua + ")"
	}
	return name
}

// hiloArgs reads the database, the tag and two integer parameters of a
// HiLo request.
func (a *API) hiloArgs(c echo.Context, p1, p2 string) (db *storage.DB, tag string, v1, v2 int64, err error) {
	if db, tag, err = a.dbParam(c, "tag"); err != nil {
		return
	}
	if v1, err = intParam(c, p1, 0); err != nil {
		return
	}
	v2, err = intParam(c, p2, 0)
	return
}

// hiloNext serves GET /hilo/next: reserve the next range for a tag.
func (a *API) hiloNext(c echo.Context) error {
	db, tag, lastSize, lastMax, err := a.hiloArgs(c, "lastBatchSize", "lastMax")
	if err != nil {
		return err
	}
	sep := c.QueryParam("identityPartsSeparator")
	if sep == "|" {
		return dberr.New(dberr.BadRequest, "The identity parts separator cannot be '|'")
	}
	var r ids.Range
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		var err error
		r, err = ids.NextRange(tx, tag, lastSize, c.QueryParam("lastRangeAt"), sep, lastMax)
		return err
	})
	if err != nil {
		return err
	}
	db.Metrics().HiLoCalls.WithLabelValues("next").Inc()
	if a.Activity != nil {
		a.Activity.RecordHiLo(db.Name(), activity.HiLoCall{Time: r.LastRangeAt, Op: "next", Tag: tag, Low: r.Low, High: r.High, Size: r.LastSize, Client: clientName(c), Node: r.ServerTag})
	}
	return writeJSON(c, http.StatusCreated, map[string]any{
		"Prefix":      r.Prefix,
		"Low":         r.Low,
		"High":        r.High,
		"LastSize":    r.LastSize,
		"ServerTag":   r.ServerTag,
		"LastRangeAt": document.FormatTime(r.LastRangeAt),
	})
}

// hiloReturn serves PUT /hilo/return: give back the unused end of a range.
func (a *API) hiloReturn(c echo.Context) error {
	db, tag, end, last, err := a.hiloArgs(c, "end", "last")
	if err != nil {
		return err
	}
	var applied bool
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		var err error
		applied, err = ids.ReturnRange(tx, tag, end, last)
		return err
	})
	if err != nil {
		return err
	}
	db.Metrics().HiLoCalls.WithLabelValues("return").Inc()
	if a.Activity != nil {
		a.Activity.RecordHiLo(db.Name(), activity.HiLoCall{Time: time.Now().UTC(), Op: "return", Tag: tag, Low: last, High: end, Client: clientName(c), Node: a.NodeTag, Applied: applied})
	}
	return c.NoContent(http.StatusNoContent)
}

// identityNext serves POST /identity/next?name=.
func (a *API) identityNext(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(name, "|") {
		name += "|"
	}
	vals, err := a.idents().TakeIdentities(c.Request().Context(), db, []string{name})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]int64{"NewIdentityValue": vals[0]})
}

// identitySeed serves POST /identity/seed?name=&value=[&force=true].
func (a *API) identitySeed(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if _, err := requiredParam(c, "value"); err != nil {
		return err
	}
	value, err := intParam(c, "value", 0)
	if err != nil {
		return err
	}
	if value < 0 {
		return dberr.New(dberr.BadRequest, "An identity cannot be seeded with a negative value (%d)", value)
	}
	force, err := boolParam(c, "force")
	if err != nil {
		return err
	}
	v, err := a.Cluster.SeedIdentity(c.Request().Context(), db.Name(), name, value, force)
	if err != nil {
		return err
	}
	db.Metrics().IdentityCalls.WithLabelValues("seed").Inc()
	return writeJSON(c, http.StatusOK, map[string]int64{"NewSeedValue": v})
}

// identities serves GET /debug/identities: a flat {"prefix|": value} object.
func (a *API) identities(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	start, pageSize, err := pagingWith(c, 1<<31-1)
	if err != nil {
		return err
	}
	all := a.Cluster.Identities(db.Name())
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]int64{}
	for i, n := range names {
		if i < start || len(out) >= pageSize {
			continue
		}
		out[n] = all[n]
	}
	return writeJSON(c, http.StatusOK, out)
}
