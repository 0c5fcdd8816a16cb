package subscriptions

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// The operators' actions on subscriptions, shared by the API and the studio.

// record finds a subscription's record by name (case-insensitive), or by id
// when name is empty and id is given (updates may name it either way).
func (m *Manager) record(db, name string, id *int64) (cluster.Subscription, bool) {
	if name != "" || id == nil {
		return m.store.Subscription(db, name)
	}
	for _, s := range m.store.Subscriptions(db) {
		if s.ID == *id {
			return s, true
		}
	}
	return cluster.Subscription{}, false
}

// Find returns a subscription's record and definition; an unknown one is a
// NotFound error.
func (m *Manager) Find(db, name string, id *int64) (cluster.Subscription, Definition, error) {
	s, ok := m.record(db, name, id)
	if !ok {
		return s, Definition{}, dberr.New(dberr.NotFound, "Subscription '%s' does not exist", name)
	}
	d, err := Parse(s.Data)
	return s, d, err
}

// Create records a subscription from a client's options, starting on
// database copy db (LastDocument is resolved there), and returns its name
// (the one given, or its id) and the log index.
func (m *Manager) Create(ctx context.Context, db DB, o Options) (string, uint64, error) {
	def, err := FromOptions(o, m.now())
	if err != nil {
		return "", 0, err
	}
	if def.Start, err = resolveStart(ctx, db, def); err != nil {
		return "", 0, err
	}
	var progress json.RawMessage
	if def.Start != BeginningOfTime {
		progress = InitialProgress(def.Start, 0).Raw() // the starting point is the first progress
	}
	raw, _ := json.Marshal(def)
	name := strings.TrimSpace(o.Name)
	if name != "" {
		if err := names.Subscription(name); err != nil {
			return "", 0, err
		}
	}
	res, err := m.store.CreateSubscription(ctx, db.Name(), name, raw, progress)
	if err != nil {
		return "", 0, err
	}
	if name == "" {
		name = strconv.FormatInt(res.Value, 10)
	}
	return name, res.Index, nil
}

// Update applies a client's update (named, or by id) and returns the
// subscription's name and the log index. A new starting point resets the
// progress, and counts as a rewind when it moves back.
func (m *Manager) Update(ctx context.Context, db DB, o Options) (string, uint64, error) {
	found, d, err := m.Find(db.Name(), o.Name, o.ID)
	if err != nil {
		return "", 0, err
	}
	if d, err = d.Update(o); err != nil {
		return "", 0, err
	}
	var progress json.RawMessage
	if o.ChangeVector != nil && *o.ChangeVector != "" && *o.ChangeVector != DoNotChange {
		if d.Start, err = resolveStart(ctx, db, d); err != nil {
			return "", 0, err
		}
		old := ParseProgress(found.Progress)
		next := InitialProgress(d.Start, old.Rewinds)
		if next.Etag(db.DatabaseID()) < old.Etag(db.DatabaseID()) {
			next.Rewinds++
		}
		progress = next.Raw()
	}
	raw, _ := json.Marshal(d)
	res, err := m.store.UpdateSubscription(ctx, db.Name(), found.Name, raw, progress)
	if err != nil {
		return "", 0, err
	}
	return found.Name, res.Index, nil
}

// resolveStart turns LastDocument into the change vector of the
// collection's newest document on copy db (the subscription starts after
// it); a literal change vector must parse.
func resolveStart(ctx context.Context, db DB, def Definition) (string, error) {
	switch def.Start {
	case BeginningOfTime:
		return def.Start, nil
	case LastDocument:
		last, err := db.CollectionLastEtag(ctx, def.Collection)
		if err != nil {
			return "", err
		}
		return Progress{}.Advanced(db.NodeTag(), db.DatabaseID(), last).Vector, nil
	}
	if _, err := changevector.Parse(def.Start); err != nil {
		return "", dberr.New(dberr.BadRequest, "ChangeVector must be BeginningOfTime, LastDocument, DoNotChange or a change vector: %v", err)
	}
	return def.Start, nil
}

// SetDisabled disables or enables a subscription (its worker is closed when
// the cluster state changes) and tells whether it changed.
func (m *Manager) SetDisabled(ctx context.Context, db, name string, id *int64, disabled bool) (bool, error) {
	s, d, err := m.Find(db, name, id)
	if err != nil || d.Disabled == disabled {
		return false, err
	}
	d.Disabled = disabled
	raw, _ := json.Marshal(d)
	_, err = m.store.UpdateSubscription(ctx, db, s.Name, raw, nil)
	return err == nil, err
}

// Delete removes a subscription (its worker is closed when the cluster
// state changes).
func (m *Manager) Delete(ctx context.Context, db, name string) error {
	s, _, err := m.Find(db, name, nil)
	if err != nil {
		return err
	}
	_, err = m.store.DeleteSubscription(ctx, db, s.Name)
	return err
}

// DisableFlagged disables the enabled subscriptions the runaway rules flag
// (only those of rule, when given) and returns the names it disabled.
func (m *Manager) DisableFlagged(ctx context.Context, db, rule string) ([]string, error) {
	names := []string{}
	for _, st := range m.Report(ctx, db).Subscriptions {
		if st.Disabled || len(st.Flags) == 0 {
			continue
		}
		match := rule == ""
		for _, f := range st.Flags {
			match = match || f.Rule == rule
		}
		if !match {
			continue
		}
		// The report is up to a second old: one disabled or deleted since
		// is not counted.
		changed, err := m.SetDisabled(ctx, db, st.Name, nil, true)
		if err != nil && !dberr.Is(err, dberr.NotFound) {
			return names, err
		}
		if changed {
			names = append(names, st.Name)
		}
	}
	return names, nil
}

// SetThresholds stores a database's monitor thresholds (unset or zero
// fields take the defaults).
func (m *Manager) SetThresholds(ctx context.Context, db string, t Thresholds) error {
	if t.ScanShare < 0 || t.ScanShare > 1 {
		return dberr.New(dberr.BadRequest, "ScanShare is a fraction between 0 and 1")
	}
	raw, _ := json.Marshal(t)
	_, err := m.store.SetSetting(ctx, db, SettingKey, raw)
	return err
}

// Try returns up to pageSize (default 10, at most 1024) documents matching
// query, as a subscription would deliver them, reading at most 100,000
// documents and creating nothing; also how many it read.
func Try(ctx context.Context, db DB, query string, pageSize int) ([]json.RawMessage, int, error) {
	if _, err := Check(query); err != nil {
		return nil, 0, err
	}
	q, _ := rql.Parse(query)
	if pageSize <= 0 {
		pageSize = 10
	}
	pageSize = min(pageSize, 1024)
	out := []json.RawMessage{}
	scanned := 0
	done := errors.New("done")
	err := db.ScanCollection(ctx, q.Collection, 0, 100_000, func(d *storage.Document) error {
		scanned++
		doc, ok, err := evaluate(q, d)
		if err != nil {
			return dberr.New(dberr.BadRequest, "Query: %v", err)
		}
		if ok {
			out = append(out, render(q, doc, d))
		}
		if len(out) >= pageSize {
			return done
		}
		return nil
	})
	if err != nil && err != done {
		return nil, 0, err
	}
	return out, scanned, nil
}

// evaluate tells whether d matches q, decoding its body only when the
// query needs it (where, select, include); doc is the decoded document.
func evaluate(q *rql.Query, d *storage.Document) (doc rql.Doc, ok bool, err error) {
	doc.ID = d.ID
	if q.Where == nil && len(q.Select) == 0 && len(q.Include) == 0 {
		return doc, true, nil
	}
	if err := json.Unmarshal(d.Body, &doc.Body); err != nil {
		return doc, false, errors.New("the stored document is not valid JSON: " + err.Error())
	}
	ok, err = q.Match(doc, nil)
	return doc, ok, err
}

// render is a matching document as a worker gets it: the stored bytes with
// the metadata spliced in, or the query's projection.
func render(q *rql.Query, doc rql.Doc, d *storage.Document) []byte {
	p := q.Project(doc)
	if p == nil {
		return d.AppendJSON(nil)
	}
	p["@metadata"] = map[string]any{"@id": d.ID, "@change-vector": d.ChangeVector, "@collection": d.Collection,
		"@projection": true, "@last-modified": document.FormatTime(d.LastModified)}
	out, _ := json.Marshal(p)
	return out
}
