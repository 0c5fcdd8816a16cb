package conflicts

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/rookerydb/rookery/backend/storage"
)

// Settings is where the configuration lives (the cluster state).
type Settings interface {
	Setting(db, key string) json.RawMessage
}

// Auto is the resolver replication calls when it detects a conflict
// (storage.Resolver). It reads the database's configuration for the
// document's collection; manual leaves the conflict stored, and so does a
// script that declines or fails (OnError hears about failures).
type Auto struct {
	Engine   *Engine
	Settings Settings
	NodeTag  string
	OnError  func(database, id string, err error)

	cache sync.Map // database → cached
}

type cached struct {
	raw string
	cfg Config
}

// Config returns a database's configuration (the default when unset or
// unreadable).
func (a *Auto) Config(database string) Config {
	raw := a.Settings.Setting(database, SettingKey)
	if c, ok := a.cache.Load(database); ok && c.(cached).raw == string(raw) {
		return c.(cached).cfg
	}
	cfg, _ := ParseConfig(raw)
	a.cache.Store(database, cached{raw: string(raw), cfg: cfg})
	return cfg
}

// ResolveConflict implements storage.Resolver.
func (a *Auto) ResolveConflict(database, collection string, versions []storage.Version) (storage.Resolution, bool) {
	strategy, script := a.Config(database).For(collection)
	if strategy == Manual {
		return storage.Resolution{}, false
	}
	d, err := a.Engine.Decide(context.Background(), strategy, script, a.NodeTag, versions)
	if err != nil {
		if a.OnError != nil {
			a.OnError(database, versions[0].ID, err)
		}
		return storage.Resolution{}, false
	}
	if d.Declined {
		return storage.Resolution{}, false
	}
	return d.Resolution, true
}
