package studio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

const (
	// identityRowsLimit bounds the rows the Identities page lists; the
	// filter narrows a longer list.
	identityRowsLimit = 500
	// identityProbeLimit bounds the flagged rows whose next free value the
	// page works out (about 2·log2(n) point reads each).
	identityProbeLimit = 50
	// identityNamesLimit bounds the names the seed form suggests.
	identityNamesLimit = 1000
	// identityPerPrefixAudit: with up to this many identities, the audit
	// asks the engine for each prefix's figures instead of copying them all.
	identityPerPrefixAudit = 8
	// identityAlertPrefix starts the keys of the audit's alerts:
	// "identity:<db>:<name|>".
	identityAlertPrefix = "identity:"
)

// registerIdentities adds the Identities page (list, sort, filter, audit)
// and its seed form.
func (s *Studio) registerIdentities(g *echo.Group) {
	g.GET("/identities", s.identitiesPage)
	g.POST("/identities/seed", s.seedIdentity)
	s.addLive("identities", s.identitiesLive, false)
}

// auditIdentities runs the identity audit over a database's counters from
// the engine's in-memory id figures.
func auditIdentities(db *storage.DB, counters map[string]int64) []ids.Audit {
	if len(counters) > identityPerPrefixAudit {
		return ids.AuditIdentities(counters, db.Separator(), db.IDNumbers(""))
	}
	out := make([]ids.Audit, 0, len(counters))
	for name, v := range counters {
		prefix := strings.TrimSuffix(name, "|") + db.Separator()
		out = append(out, ids.AuditIdentity(name, v, db.Separator(), db.IDNumbers(prefix)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func identityView(q url.Values) views.IdentitiesView {
	v := views.IdentitiesView{Filter: strings.TrimSpace(q.Get("q")), Sort: "prefix"}
	if q.Get("sort") == "value" {
		v.Sort = "value"
	}
	v.Desc = q.Get("dir") == "desc"
	return v
}

// nextIdentity is the value the next document of identity name gets after
// counter, probing existing documents like the server does (a few point
// reads).
func nextIdentity(ctx context.Context, db *storage.DB, name string, counter int64) (int64, error) {
	v, _, err := ids.NextIdentityValue(counter, func(n int64) (bool, error) {
		d, err := db.Get(ctx, ids.IdentityID(name, db.Separator(), n))
		return d != nil, err
	})
	return v, err
}

func (s *Studio) identitiesData(ctx context.Context, name string, q url.Values) (views.IdentitiesData, *storage.DB, map[string]int64, error) {
	db, err := s.Catalog.Get(name)
	if err != nil {
		return views.IdentitiesData{}, nil, nil, err
	}
	counters := s.Cluster.Identities(db.Name())
	d := views.IdentitiesData{Database: db.Name(), Separator: db.Separator(), View: identityView(q), Total: len(counters)}
	sep := db.Separator()
	filter := strings.ToLower(d.View.Filter)
	var rows []views.IdentityRow
	for _, a := range auditIdentities(db, counters) {
		if a.Collides {
			d.Flagged++
		}
		if filter != "" && !strings.Contains(a.Name, filter) {
			continue
		}
		rows = append(rows, views.IdentityRow{
			Name: a.Name, Value: a.Counter, Docs: a.Docs, MaxN: a.MaxN, Collide: a.Collides,
			NextID:    ids.IdentityID(a.Name, sep, a.Counter+1),
			HighestID: ids.IdentityID(a.Name, sep, a.MaxN),
		})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if d.View.Sort == "value" && a.Value != b.Value {
			return (a.Value < b.Value) != d.View.Desc
		}
		if a.Name == b.Name {
			return false
		}
		return (a.Name < b.Name) != d.View.Desc
	})
	d.Matched = len(rows)
	if len(rows) > identityRowsLimit {
		rows = rows[:identityRowsLimit]
	}
	probed := 0
	for i := range rows {
		r := &rows[i]
		if !r.Collide || probed >= identityProbeLimit || r.Value == 1<<63-1 {
			continue
		}
		probed++
		if v, err := nextIdentity(ctx, db, r.Name, r.Value); err == nil {
			r.NextFree, r.NextID = v, ids.IdentityID(r.Name, sep, v)
		}
	}
	d.Rows = rows
	names := make([]string, 0, len(counters))
	for n := range counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names[:min(len(names), identityNamesLimit)] {
		d.Names = append(d.Names, views.IdentityRow{Name: n, Value: counters[n]})
	}
	return d, db, counters, nil
}

// seedPreview fills the form from seedPrefix/seedValue (an Edit link, or a
// refused lowering coming back) with the server-side preview.
func seedPreview(ctx context.Context, db *storage.DB, counters map[string]int64, q url.Values) views.SeedForm {
	f := views.SeedForm{Prefix: strings.TrimSpace(q.Get("seedPrefix")), Value: strings.TrimSpace(q.Get("seedValue"))}
	if f.Prefix == "" || f.Value == "" {
		return f
	}
	v, err := strconv.ParseInt(f.Value, 10, 64)
	if err != nil || v < 0 || strings.TrimRight(f.Prefix, "|") == "" {
		return f
	}
	name := ids.IdentityName(f.Prefix)
	f.Current, f.Known = counters[name]
	f.Lower = f.Known && v < f.Current
	base := strings.TrimSuffix(f.Prefix, "|") + "|"
	f.Preview = "next document: " + ids.IdentityID(base, db.Separator(), v+1)
	if v < 1<<63-1 {
		if next, err := nextIdentity(ctx, db, base, v); err == nil && next != v+1 {
			f.Preview = "next document: " + ids.IdentityID(base, db.Separator(), next) +
				" (" + ids.IdentityID(base, db.Separator(), v+1) + " exists; taken values are skipped)"
		}
	}
	return f
}

func (s *Studio) identitiesPage(c echo.Context) error {
	ctx := c.Request().Context()
	d, db, counters, err := s.identitiesData(ctx, c.Param("db"), c.QueryParams())
	if err != nil {
		return s.studioError(c, "", err)
	}
	d.Seed = seedPreview(ctx, db, counters, c.QueryParams())
	return render(c, http.StatusOK, s.chrome(c, "Identities · "+d.Database, d.Database, views.NavIdentities, "identities"), views.IdentitiesPage(d))
}

func (s *Studio) identitiesLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	d, _, _, err := s.identitiesData(ctx, q.Get("db"), q)
	if err != nil {
		return nil, err
	}
	return []views.Fragment{{ID: "identities-table", C: views.IdentitiesTable(d)}}, nil
}

// errLowerRefused refuses lowering an identity without the confirmation.
type errLowerRefused struct {
	name         string
	current, val int64
}

func (e *errLowerRefused) Error() string {
	return fmt.Sprintf("%s is at %d; %d would lower it, so ids already handed out could come up again. Tick the confirmation to lower it. Nothing was changed.", e.name, e.current, e.val)
}

// seedIdentity serves the seed form: a forced seed (the counter becomes
// exactly the value), refused when it lowers the counter without the
// confirmation. The check and the seed happen in one transaction.
func (s *Studio) seedIdentity(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	page := string(views.DBURL(db.Name(), "identities"))
	prefix := strings.TrimSpace(c.FormValue("prefix"))
	raw := strings.TrimSpace(c.FormValue("value"))
	back := func(msg string) error {
		q := url.Values{"seedPrefix": {prefix}, "seedValue": {raw}, "error": {msg}}
		return c.Redirect(http.StatusSeeOther, page+"?"+q.Encode()+"#seed")
	}
	if strings.TrimRight(prefix, "|") == "" {
		return back("Type the identity's prefix (e.g. orders or orders|). Nothing was changed.")
	}
	if strings.Contains(strings.TrimSuffix(prefix, "|"), "|") {
		return back("An identity prefix has at most one '|', at its end. Nothing was changed.")
	}
	if len(prefix) > storage.MaxIDBytes-20 {
		return back("That prefix is too long for a document id. Nothing was changed.")
	}
	value, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || value < 0 {
		return back("The value must be a whole number from 0 up. Nothing was changed.")
	}
	confirmed := c.FormValue("confirmLower") != ""
	name := ids.IdentityName(prefix)
	// The counters live in the cluster's log: read, check, then a forced seed.
	before := s.Cluster.Identities(db.Name())[name]
	if value < before && !confirmed {
		err = &errLowerRefused{name: name, current: before, val: value}
	} else {
		_, err = s.Cluster.SeedIdentity(c.Request().Context(), db.Name(), name, value, true)
	}
	var refused *errLowerRefused
	if errors.As(err, &refused) {
		return back(refused.Error())
	}
	if err != nil {
		return back("The identity was not set: " + err.Error())
	}
	base := strings.TrimSuffix(prefix, "|") + "|"
	next := ids.IdentityID(base, db.Separator(), value+1)
	if value < 1<<63-1 {
		if v, err := nextIdentity(c.Request().Context(), db, base, value); err == nil {
			next = ids.IdentityID(base, db.Separator(), v)
		}
	}
	msg := fmt.Sprintf("%s set to %d (was %d); next document: %s.", name, value, before, next)
	return redirectFlash(c, page, msg, false)
}

// auditTick raises a warning for each identity counter the audit flags
// (a document above the counter exists) and clears it once the counter is
// safe again or gone. It reads the counters and the in-memory id figures
// only, so it is cheap enough to run every second.
func (s *Studio) auditTick(ctx context.Context) {
	if s.Catalog == nil || s.Alerts == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	flagged := map[string]bool{}
	for _, db := range s.Catalog.All() {
		counters := s.Cluster.Identities(db.Name())
		for _, a := range auditIdentities(db, counters) {
			key := identityAlertPrefix + db.Name() + ":" + a.Name
			if !a.Collides {
				s.Alerts.Clear(key) // also forgets a dismissal
				continue
			}
			flagged[key] = true
			s.Alerts.Raise(alerts.Alert{
				Key:      key,
				Level:    alerts.Warning,
				Database: db.Name(),
				Link:     string(views.DBURL(db.Name(), "identities")),
				Title:    "Identity " + a.Name + " would collide",
				Message: fmt.Sprintf("The counter is %d but %s exists: the next values up to %d may already be taken, so new %s documents skip them and ids will not be sequential. Seed the identity to %d or more on the Identities page.",
					a.Counter, ids.IdentityID(a.Name, db.Separator(), a.MaxN), a.MaxN, a.Name, a.MaxN),
			})
		}
	}
	// Alerts of identities or databases that are gone.
	for _, a := range s.Alerts.List() {
		if strings.HasPrefix(a.Key, identityAlertPrefix) && !flagged[a.Key] {
			s.Alerts.Clear(a.Key)
		}
	}
}
