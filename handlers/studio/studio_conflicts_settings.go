package studio

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

const (
	settingsTestIDs  = 100 // conflicted ids the test-run offers
	settingsMaxRules = 1000
)

// settingsOptions are the automatic strategies (no local: every copy would
// keep its own version). Strategies in use that the members do not cover
// (node:X of a node that left) stay choosable.
func (s *Studio) settingsOptions(db string, inUse ...string) []views.StrategyOption {
	opts := []views.StrategyOption{
		{Value: conflicts.Latest, Label: "Latest version (newest last-modified)"},
		{Value: conflicts.Manual, Label: "Manual: keep the conflict for a person"},
		{Value: conflicts.Node + ":" + s.NodeTag, Label: "Prefer this node (" + s.NodeTag + ")"},
	}
	have := map[string]bool{conflicts.Latest: true, conflicts.Manual: true, conflicts.Script: true, conflicts.Node + ":" + s.NodeTag: true}
	for _, tag := range s.members(db) {
		v := conflicts.Node + ":" + tag
		if !have[v] {
			have[v] = true
			opts = append(opts, views.StrategyOption{Value: v, Label: "Prefer node " + tag})
		}
	}
	for _, v := range inUse {
		if !have[v] && strings.HasPrefix(v, conflicts.Node+":") {
			have[v] = true
			opts = append(opts, views.StrategyOption{Value: v, Label: "Prefer node " + strings.TrimPrefix(v, conflicts.Node+":")})
		}
	}
	return append(opts, views.StrategyOption{Value: conflicts.Script, Label: "Script"})
}

func (s *Studio) storedConflictConfig(db string) conflicts.Config {
	if s.Cluster == nil {
		return conflicts.Config{}
	}
	cfg, _ := conflicts.ParseConfig(s.Cluster.Setting(db, conflicts.SettingKey))
	return cfg
}

// settingsData fills the page around the form's values.
func (s *Studio) settingsData(ctx context.Context, db *storage.DB, p views.SettingsPageData) (views.SettingsPageData, error) {
	p.DB, p.NodeTag = db.Name(), s.NodeTag
	inUse := []string{p.Default}
	for _, r := range p.Rules {
		inUse = append(inUse, r.Strategy)
	}
	p.Options = s.settingsOptions(db.Name(), inUse...)
	if n := len(p.Rules); n == 0 || p.Rules[n-1].Collection != "" {
		p.Rules = append(p.Rules, views.SettingsRule{Strategy: conflicts.Latest})
	}
	list, _, err := db.ConflictList(ctx, storage.ConflictFilter{}, settingsTestIDs+1)
	if err != nil {
		return p, err
	}
	if p.TestMore = len(list) > settingsTestIDs; p.TestMore {
		list = list[:settingsTestIDs]
	}
	for _, c := range list {
		p.TestIDs = append(p.TestIDs, c.ID)
	}
	return p, nil
}

func (s *Studio) renderSettings(c echo.Context, db *storage.DB, p views.SettingsPageData, status int) error {
	p, err := s.settingsData(c.Request().Context(), db, p)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	ch := s.chrome(c, "Conflict settings · "+db.Name(), db.Name(), views.NavConflicts, "")
	return render(c, status, ch, views.ConflictSettingsPage(p))
}

// conflictSettings serves GET /studio/db/{db}/conflicts/settings with the
// stored configuration.
func (s *Studio) conflictSettings(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	cfg := s.storedConflictConfig(db.Name())
	p := views.SettingsPageData{Default: cmp.Or(cfg.Default, conflicts.Latest), Script: cfg.Script, TestID: c.QueryParam("test")}
	for _, name := range cfg.CollectionNames() {
		cc := cfg.Collections[name]
		p.Rules = append(p.Rules, views.SettingsRule{Collection: name, Strategy: cmp.Or(cc.Strategy, conflicts.Latest), Script: cc.Script})
	}
	return s.renderSettings(c, db, p, http.StatusOK)
}

// settingsForm reads the posted form: the values to show again, and the
// configuration they describe (removed and empty rows left out).
func settingsForm(c echo.Context) (views.SettingsPageData, conflicts.Config, error) {
	f := c.Request().PostForm
	p := views.SettingsPageData{Default: strings.TrimSpace(f.Get("default")), Script: f.Get("script"), TestID: f.Get("testId")}
	cfg := conflicts.Config{Default: p.Default, Script: p.Script}
	n, _ := strconv.Atoi(f.Get("rules"))
	var err error
	seen := map[string]bool{}
	for i := 0; i < min(n, settingsMaxRules); i++ {
		key := "c" + strconv.Itoa(i) + "."
		r := views.SettingsRule{Collection: strings.TrimSpace(f.Get(key + "name")), Strategy: strings.TrimSpace(f.Get(key + "strategy")), Script: f.Get(key + "script")}
		if r.Collection == "" || f.Get(key+"remove") != "" {
			continue
		}
		p.Rules = append(p.Rules, r)
		low := strings.ToLower(r.Collection)
		if seen[low] && err == nil {
			err = dberr.New(dberr.BadRequest, "Collection %s has two rows; keep one. Nothing was saved.", r.Collection)
		}
		seen[low] = true
		if cfg.Collections == nil {
			cfg.Collections = map[string]conflicts.CollectionConfig{}
		}
		cfg.Collections[r.Collection] = conflicts.CollectionConfig{Strategy: r.Strategy, Script: r.Script}
	}
	return p, cfg, err
}

// conflictSettingsPost serves POST /studio/db/{db}/conflicts/settings:
// save (validated; refused with the text kept), add a row, or test-run the
// form's strategy on a conflict without saving.
func (s *Studio) conflictSettingsPost(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	p, cfg, formErr := settingsForm(c)
	switch c.FormValue("action") {
	case "add":
		// The rows typed so far (the blank one included once filled) and a
		// fresh blank row; nothing is saved.
		p.Rules = append(p.Rules, views.SettingsRule{Strategy: conflicts.Latest})
		return s.renderSettings(c, db, p, http.StatusOK)
	case "test":
		p.Test, err = s.testRun(c.Request().Context(), db, cfg, p.TestID)
		if err != nil {
			p.Error = err.Error()
			return s.renderSettings(c, db, p, http.StatusBadRequest)
		}
		return s.renderSettings(c, db, p, http.StatusOK)
	}
	err = formErr
	if err == nil {
		if s.Cluster == nil {
			err = dberr.New(dberr.Unavailable, "The cluster is not available; nothing was saved.")
		} else {
			_, err = conflicts.SaveConfig(c.Request().Context(), s.Cluster, db.Name(), &cfg)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		if k := dberr.KindOf(err); k != dberr.BadRequest && k != dberr.InvalidOperation {
			return s.studioError(c, db.Name(), err)
		}
		p.Error = "Not saved: " + err.Error()
		return s.renderSettings(c, db, p, http.StatusBadRequest)
	}
	return redirectFlash(c, string(views.DBURL(db.Name(), "conflicts/settings")), "Saved. New conflicts in "+db.Name()+" resolve with this configuration on every node.", false)
}

// testRun applies the strategy the form's configuration gives a conflicted
// id's collection to its versions. Nothing is written.
func (s *Studio) testRun(ctx context.Context, db *storage.DB, cfg conflicts.Config, id string) (*views.TestRun, error) {
	if s.Conflicts == nil || s.Conflicts.Engine == nil {
		return nil, dberr.New(dberr.Unavailable, "Test runs are not available on this node.")
	}
	if id == "" {
		return nil, dberr.New(dberr.BadRequest, "Choose a conflicted id to test against.")
	}
	all, err := db.ConflictVersions(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	vs := all[storage.LowerID(id)]
	if len(vs) == 0 {
		return nil, dberr.New(dberr.BadRequest, "%s is no longer in conflict; choose another id.", id)
	}
	t := &views.TestRun{ID: vs[0].ID, Collection: vs[0].Collection, Rule: "the default", Versions: versionViews(vs), Winner: -1}
	for name := range cfg.Collections {
		if strings.EqualFold(name, t.Collection) {
			t.Rule = "collection " + name + "'s rule"
		}
	}
	strategy, script := cfg.For(t.Collection)
	// Check (and normalise) only the rule that applies: another row's
	// mistake does not stop this test.
	one := conflicts.Config{Default: strategy, Script: script}
	if err := one.Validate(); err != nil {
		t.Strategy, t.Error = cmp.Or(strategy, conflicts.Latest), strings.TrimPrefix(err.Error(), "default strategy: ")
		return t, nil
	}
	t.Strategy = cmp.Or(one.Default, conflicts.Latest)
	d, err := s.Conflicts.Engine.Decide(ctx, t.Strategy, one.Script, s.NodeTag, vs)
	switch {
	case err != nil:
		t.Error = err.Error()
	case d.Declined:
		t.Declined = true
	default:
		t.Winner, t.Tombstone = d.Winner, d.Resolution.Tombstone
		if !t.Tombstone {
			t.JSON = docPretty(d.Resolution.Body)
		}
	}
	return t, nil
}
