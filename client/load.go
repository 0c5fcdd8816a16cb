package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
)

// Load loads the document id into out and tracks it, so that changes to it
// are saved by SaveChanges. It returns false (and no error) when the
// document does not exist. out is one of:
//
//   - **T (e.g. var o *Order; Load(id, &o)): o is set to the tracked entity,
//     the same pointer every time this session loads id;
//   - *T (e.g. var o Order; Load(id, &o)): o becomes the tracked entity, or,
//     if the session already tracks id under another pointer, a copy of it;
//   - *map[string]any: a map holding the document (without @metadata).
//
// A document the session already tracks, or received as an include, is
// returned without a request.
func (s *Session) Load(id string, out any) (bool, error) {
	if err := s.checkOpen(); err != nil {
		return false, err
	}
	t, err := parseTarget(out)
	if err != nil {
		return false, err
	}
	found, err := s.loadOne(id, t, nil)
	return found, err
}

func (s *Session) loadOne(id string, t target, includes []string) (bool, error) {
	lid := strings.ToLower(id)
	if _, ok := s.deleted[lid]; ok {
		return false, nil
	}
	if info, ok := s.byID[lid]; ok && len(includes) == 0 {
		return true, t.fromTracked(info)
	}
	if raw, ok := s.included[lid]; ok && len(includes) == 0 {
		if isNull(raw) {
			return false, nil
		}
		return true, s.materialize(id, raw, t)
	}
	docs, err := s.fetch([]string{id}, includes)
	if err != nil {
		return false, err
	}
	if len(docs) == 0 || isNull(docs[0]) {
		return false, nil
	}
	if info, ok := s.byID[lid]; ok {
		return true, t.fromTracked(info)
	}
	return true, s.materialize(id, docs[0], t)
}

// LoadMulti loads several documents in one request (ids the session already
// has are not requested). out is a pointer to a map keyed by id:
// *map[string]*T or *map[string]map[string]any. Missing documents map to
// nil.
func (s *Session) LoadMulti(ids []string, out any) error {
	return s.loadMulti(ids, out, nil)
}

func (s *Session) loadMulti(ids []string, out any, includes []string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ov := reflect.ValueOf(out)
	if ov.Kind() != reflect.Pointer || ov.IsNil() || ov.Elem().Kind() != reflect.Map || ov.Elem().Type().Key().Kind() != reflect.String {
		return fmt.Errorf("rookery: LoadMulti needs a pointer to a map keyed by id, got %T", out)
	}
	mt := ov.Elem().Type()
	vt := mt.Elem()
	if !(vt.Kind() == reflect.Pointer && vt.Elem().Kind() == reflect.Struct) && !(vt.Kind() == reflect.Map && vt.Key().Kind() == reflect.String) {
		return fmt.Errorf("rookery: LoadMulti: map values must be *struct or map[string]..., got %s", vt)
	}
	if ov.Elem().IsNil() {
		ov.Elem().Set(reflect.MakeMapWithSize(mt, len(ids)))
	}
	m := ov.Elem()
	var missing []string
	for _, id := range ids {
		lid := strings.ToLower(id)
		_, del := s.deleted[lid]
		_, tracked := s.byID[lid]
		_, incl := s.included[lid]
		if !del && !tracked && (!incl || len(includes) > 0) && !contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		docs, err := s.fetch(missing, includes)
		if err != nil {
			return err
		}
		for i, id := range missing {
			if i < len(docs) {
				s.included[strings.ToLower(id)] = docs[i]
			}
		}
	}
	for _, id := range ids {
		slot := reflect.New(vt)
		found, err := s.loadOne(id, target{kind: valueTarget(vt), v: slot}, nil)
		if err != nil {
			return err
		}
		if found {
			m.SetMapIndex(reflect.ValueOf(id).Convert(mt.Key()), slot.Elem())
		} else {
			m.SetMapIndex(reflect.ValueOf(id).Convert(mt.Key()), reflect.Zero(vt))
		}
	}
	return nil
}

// Includer loads documents together with the documents they reference.
type Includer struct {
	s     *Session
	paths []string
}

// Include names fields (dotted paths) of the next loaded documents that hold
// ids of other documents; the server sends those documents along, and later
// loads of them need no request.
func (s *Session) Include(paths ...string) *Includer {
	return &Includer{s: s, paths: paths}
}

// Load is Session.Load with the includes.
func (in *Includer) Load(id string, out any) (bool, error) {
	if err := in.s.checkOpen(); err != nil {
		return false, err
	}
	t, err := parseTarget(out)
	if err != nil {
		return false, err
	}
	return in.s.loadOne(id, t, in.paths)
}

// LoadMulti is Session.LoadMulti with the includes.
func (in *Includer) LoadMulti(ids []string, out any) error {
	return in.s.loadMulti(ids, out, in.paths)
}

// Load is the generic form of Session.Load: it returns the tracked entity,
// or nil when the document does not exist.
func Load[T any](s *Session, id string) (*T, error) {
	var p *T
	found, err := s.Load(id, &p)
	if err != nil || !found {
		return nil, err
	}
	return p, nil
}

// LoadMany is the generic form of Session.LoadMulti.
func LoadMany[T any](s *Session, ids ...string) (map[string]*T, error) {
	out := map[string]*T{}
	if err := s.LoadMulti(ids, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// maxGetIDsLength: longer id lists are sent in a POST body.
const maxGetIDsLength = 1024

// fetch asks the server for documents (one request) and returns them in the
// order of ids, null for missing ones. Included documents are remembered.
func (s *Session) fetch(ids, includes []string) ([]json.RawMessage, error) {
	var q strings.Builder
	for _, p := range includes {
		q.WriteString("&include=")
		q.WriteString(url.QueryEscape(p))
	}
	total := 0
	for _, id := range ids {
		total += len(id)
	}
	r := &request{method: http.MethodGet, path: "/docs", dbScoped: true, cacheable: !s.NoCaching}
	if total >= maxGetIDsLength {
		body, err := json.Marshal(struct {
			Ids []string `json:"Ids"`
		}{ids})
		if err != nil {
			return nil, err
		}
		r.method, r.body, r.cacheable = http.MethodPost, body, false
		q.WriteString("&loadHash=")
		q.WriteString(newUUID())
	} else {
		for _, id := range ids {
			q.WriteString("&id=")
			q.WriteString(url.QueryEscape(id))
		}
	}
	r.query = q.String()
	s.requests++
	resp, err := s.store.executor.execute(s.ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return make([]json.RawMessage, len(ids)), nil
	}
	if resp.status != http.StatusOK {
		return nil, fmt.Errorf("rookery: load: unexpected status %d", resp.status)
	}
	var out struct {
		Results  []json.RawMessage          `json:"Results"`
		Includes map[string]json.RawMessage `json:"Includes"`
	}
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return nil, fmt.Errorf("rookery: load: %w", err)
	}
	for id, raw := range out.Includes {
		if _, tracked := s.byID[strings.ToLower(id)]; !tracked {
			s.included[strings.ToLower(id)] = raw
		}
	}
	if len(out.Results) != len(ids) {
		return nil, fmt.Errorf("rookery: load: %d results for %d ids", len(out.Results), len(ids))
	}
	return out.Results, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// materialize turns a document into a tracked entity held by t.
func (s *Session) materialize(requestedID string, raw json.RawMessage, t target) error {
	var env struct {
		Metadata map[string]any `json:"@metadata"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("rookery: document %q: %w", requestedID, err)
	}
	if env.Metadata == nil {
		env.Metadata = map[string]any{}
	}
	id, _ := env.Metadata["@id"].(string)
	if id == "" {
		id = requestedID
	}
	if info, ok := s.byID[strings.ToLower(id)]; ok {
		return t.fromTracked(info)
	}
	if t.kind == targetStruct {
		if _, tracked := s.byEntity[t.v.Pointer()]; tracked {
			return fmt.Errorf("rookery: the variable passed to Load already holds another tracked document; load %q into a new variable", id)
		}
	}
	entity, ptr, err := t.newEntity()
	if err != nil {
		return err
	}
	if err := unmarshalInto(raw, ptr); err != nil {
		return fmt.Errorf("rookery: document %q into %T: %w", id, entity, err)
	}
	ti := s.store.types.get(ptrElemType(ptr))
	if ti.isMap {
		ptr.SetMapIndex(reflect.ValueOf("@metadata").Convert(ptr.Type().Key()), reflect.Value{})
	} else {
		setEntityID(ptr, ti, id)
	}
	cv, _ := env.Metadata["@change-vector"].(string)
	info := &docInfo{id: id, entity: entity, ptr: ptr, ti: ti, metadata: env.Metadata, changeVector: cv}
	if snap, err := s.serialize(info); err == nil {
		info.snapshot = snap
	}
	delete(s.included, strings.ToLower(id))
	s.track(ptr.Pointer(), info)
	t.publish(ptr)
	return nil
}

// unmarshalInto decodes raw into the entity held by v (a pointer, or a map).
func unmarshalInto(raw []byte, v reflect.Value) error {
	if v.Kind() == reflect.Map {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		return json.Unmarshal(raw, p.Interface())
	}
	return json.Unmarshal(raw, v.Interface())
}

func ptrElemType(v reflect.Value) reflect.Type {
	if v.Kind() == reflect.Pointer {
		return v.Elem().Type()
	}
	return v.Type()
}

// target is where Load puts an entity.
type target struct {
	kind targetKind
	v    reflect.Value // the out pointer
}

type targetKind int

const (
	targetPtrPtr targetKind = iota // **T
	targetStruct                   // *T
	targetMap                      // *map[string]X
)

func valueTarget(vt reflect.Type) targetKind {
	if vt.Kind() == reflect.Map {
		return targetMap
	}
	return targetPtrPtr
}

func parseTarget(out any) (target, error) {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return target{}, fmt.Errorf("rookery: Load needs a non-nil pointer, got %T", out)
	}
	e := v.Type().Elem()
	switch {
	case e.Kind() == reflect.Struct:
		return target{kind: targetStruct, v: v}, nil
	case e.Kind() == reflect.Pointer && e.Elem().Kind() == reflect.Struct:
		return target{kind: targetPtrPtr, v: v}, nil
	case e.Kind() == reflect.Map && e.Key().Kind() == reflect.String:
		return target{kind: targetMap, v: v}, nil
	}
	return target{}, fmt.Errorf("rookery: Load into %T is not supported (use *T, **T or *map[string]any)", out)
}

// newEntity returns the entity a document is decoded into, and its value.
func (t target) newEntity() (any, reflect.Value, error) {
	switch t.kind {
	case targetPtrPtr:
		p := reflect.New(t.v.Type().Elem().Elem())
		return p.Interface(), p, nil
	case targetStruct:
		t.v.Elem().SetZero()
		return t.v.Interface(), t.v, nil
	case targetMap:
		m := reflect.MakeMap(t.v.Type().Elem())
		return m.Interface(), m, nil
	}
	return nil, reflect.Value{}, errors.New("rookery: bad load target")
}

// publish stores a new entity into the out variable.
func (t target) publish(ptr reflect.Value) {
	switch t.kind {
	case targetPtrPtr, targetMap:
		t.v.Elem().Set(ptr)
	}
}

// fromTracked hands an already tracked entity to the out variable.
func (t target) fromTracked(info *docInfo) error {
	switch t.kind {
	case targetPtrPtr:
		if info.ptr.Type().AssignableTo(t.v.Type().Elem()) {
			t.v.Elem().Set(info.ptr)
			return nil
		}
	case targetStruct:
		if info.ptr.Kind() == reflect.Pointer && info.ptr.Pointer() == t.v.Pointer() {
			return nil
		}
		if info.ptr.Type() == t.v.Type() {
			t.v.Elem().Set(info.ptr.Elem())
			return nil
		}
	case targetMap:
		if info.ptr.Type().AssignableTo(t.v.Type().Elem()) {
			t.v.Elem().Set(info.ptr)
			return nil
		}
	}
	return fmt.Errorf("rookery: %q is already tracked by this session as %s, cannot load it as %s", info.id, info.ptr.Type(), t.v.Type().Elem())
}
