package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Damage describes a database copy this node will not serve.
type Damage struct {
	// Name is the database (lower-cased: the name of its directory, since
	// a damaged file may not say its own name).
	Name string
	// Reason is one of storage.Reason*.
	Reason string
	// Detail says what is wrong, in one sentence.
	Detail   string
	Detected time.Time
	// Dir is where its files are.
	Dir string
}

// err is what a request to a damaged database gets: 503, never its data.
func (d *Damage) err() error {
	return &dberr.Error{Kind: dberr.Unavailable, Database: d.Name, Msg: fmt.Sprintf(
		"Database '%s' is damaged and is not served (%s, detected %s): %s. "+
			"To recover, re-seed this copy from a healthy member: POST /admin/databases/reseed?name=%s, or the Re-seed button on the studio's Databases page; "+
			"a database with no other member must be restored from a backup.",
		d.Name, d.Reason, d.Detected.Format(time.RFC3339), strings.TrimSuffix(d.Detail, "."), d.Name)}
}

// Damaged lists the damaged databases, sorted by name.
func (c *Catalog) Damaged() []Damage {
	c.mu.RLock()
	out := make([]Damage, 0, len(c.damaged))
	for _, d := range c.damaged {
		out = append(out, *d)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DamageOf returns a database's damage, if it is damaged.
func (c *Catalog) DamageOf(name string) (Damage, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if d := c.damaged[strings.ToLower(name)]; d != nil {
		return *d, true
	}
	return Damage{}, false
}

type damagedRecord struct {
	Reason   string
	Detail   string
	Detected time.Time
}

func readDamaged(dir string) (*Damage, bool) {
	b, err := os.ReadFile(filepath.Join(dir, damagedFile))
	if err != nil {
		return nil, false
	}
	var r damagedRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Reason == "" {
		r = damagedRecord{Reason: storage.ReasonUnreadable, Detail: "its damage record " + filepath.Join(dir, damagedFile) + " is unreadable"}
	}
	return &Damage{Reason: r.Reason, Detail: r.Detail, Detected: r.Detected}, true
}

// writeDamaged records a damage in the database's directory, durably, so
// the copy stays out of service across restarts.
func writeDamaged(d *Damage) error {
	b, _ := json.MarshalIndent(damagedRecord{Reason: d.Reason, Detail: d.Detail, Detected: d.Detected}, "", "  ")
	path := filepath.Join(d.Dir, damagedFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// MarkDamaged takes a served database out of service: it is closed, kept
// in the damaged state and recorded as damaged in its directory (so a
// restart does not serve it again). db must be the open handle (a handle
// already replaced or closed is ignored); it reports whether it acted.
func (c *Catalog) MarkDamaged(db *storage.DB, reason, detail string) bool {
	key := strings.ToLower(db.Name())
	c.mu.Lock()
	if c.dbs[key] != db {
		c.mu.Unlock()
		return false
	}
	d := &Damage{Name: key, Reason: reason, Detail: detail, Detected: time.Now().UTC(), Dir: filepath.Join(c.dir, key)}
	delete(c.dbs, key)
	c.damaged[key] = d
	c.mu.Unlock()
	if err := db.Close(); err != nil {
		c.log.Warn("closing a damaged database", "database", key, "error", err)
	}
	if err := writeDamaged(d); err != nil {
		c.log.Error("could not record the damage on disk; a restart may serve this copy again until the damage is seen again", "database", key, "error", err)
	}
	c.log.Error("database is damaged; no longer serving it", "database", key, "reason", reason, "detail", detail)
	c.emit(Event{Type: "damaged", Name: key})
	return true
}

// Reseeded is the outcome of a re-seed.
type Reseeded struct {
	DB *storage.DB
	// Kept is where the damaged copy's files were moved.
	Kept string
}

// Reseed replaces a damaged copy with a new, empty one that has a new
// database id (so no etag of the old id is ever reused), for replication
// from the other members to fill. The damaged files are moved to
// <data>/damaged/<name>-<time> and kept.
func (c *Catalog) Reseed(name string, opts Options) (Reseeded, error) {
	sep, err := Separator(opts.Separator)
	if err != nil {
		return Reseeded{}, err
	}
	opts.Separator = sep
	key := strings.ToLower(name)
	c.mu.Lock()
	d := c.damaged[key]
	if d == nil {
		healthy := c.dbs[key] != nil
		c.mu.Unlock()
		if healthy {
			return Reseeded{}, dberr.New(dberr.InvalidOperation, "Database '%s' is not damaged on this node; there is nothing to re-seed", name)
		}
		return Reseeded{}, &dberr.Error{Kind: dberr.DatabaseMissing, Database: name, Msg: "Database '" + name + "' does not exist."}
	}
	kept := filepath.Join(c.root, damagedDir, key+"-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		c.mu.Unlock()
		return Reseeded{}, err
	}
	if err := os.Rename(filepath.Join(c.dir, key), kept); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.mu.Unlock()
		return Reseeded{}, fmt.Errorf("move the damaged copy aside: %w", err)
	}
	db, err := c.openNew(key, name, opts)
	if err != nil {
		c.mu.Unlock()
		return Reseeded{}, fmt.Errorf("create the new copy (the damaged one is in %s): %w", kept, err)
	}
	delete(c.damaged, key)
	c.mu.Unlock()
	c.log.Warn("damaged database re-seeded: a new, empty copy with a new database id; replication fills it", "database", name,
		"database_id", db.DatabaseID(), "damaged_copy", kept, "reason", d.Reason)
	c.emit(Event{Type: "created", Name: db.Name(), DB: db})
	return Reseeded{DB: db, Kept: kept}, nil
}
