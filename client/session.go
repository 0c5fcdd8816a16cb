package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
)

// SessionOptions configure one session.
type SessionOptions struct {
	// UseOptimisticConcurrency makes SaveChanges send the change vector each
	// document was loaded with ("" for new documents), so the server rejects
	// the batch with a ConcurrencyError if a document changed meanwhile or a
	// new one already exists.
	UseOptimisticConcurrency bool
	// NoCaching bypasses the HTTP cache for this session's loads.
	NoCaching bool
	// Context is used by every request of the session; Background if nil.
	Context context.Context
}

// Session is a unit of work: it tracks the entities it stored or loaded and
// writes all their changes in one request on SaveChanges. A session is not
// safe for concurrent use; open one per goroutine (they are cheap).
type Session struct {
	store *DocumentStore
	ctx   context.Context

	// UseOptimisticConcurrency: see SessionOptions.
	UseOptimisticConcurrency bool
	// NoCaching: see SessionOptions.
	NoCaching bool

	byID        map[string]*docInfo  // lower-cased id → tracked document
	byEntity    map[uintptr]*docInfo // entity pointer → tracked document
	order       []*docInfo           // tracking order, for SaveChanges
	deleted     map[string]*deletion // lower-cased id → pending delete
	deleteOrder []*deletion
	included    map[string]json.RawMessage // lower-cased id → document from Includes
	requests    int
	indexWait   *IndexWaitOptions // WaitForIndexesAfterSaveChanges
	// storeErr is the error of a Store that could not take an id (the
	// database is missing, the server is down): the entity is not in the
	// unit of work, so SaveChanges returns this error instead of saving
	// the rest as if nothing had been lost.
	storeErr error
	// patches are the deferred PATCH commands (Patch, Increment), sent
	// after the puts by SaveChanges.
	patches []pendingPatch
	// lazy are the pending lazy loads (see lazy.go).
	lazy []*Lazy
}

// docInfo is a tracked entity.
type docInfo struct {
	id           string // final id; "" or a server-side pattern until saved when serverID
	entity       any    // the pointer (or map) the application holds
	ptr          reflect.Value
	ti           *typeInfo
	metadata     map[string]any
	changeVector string
	snapshot     []byte // the document as last loaded or saved; nil for new
	isNew        bool
	serverID     bool    // the server assigns the final id (null, "x|", "x/")
	expectedCV   *string // StoreWithChangeVector
	removed      bool    // untracked (deleted or evicted)
}

type deletion struct {
	id string
	cv *string
}

func newSession(store *DocumentStore, opts SessionOptions) *Session {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return &Session{
		store:                    store,
		ctx:                      ctx,
		UseOptimisticConcurrency: opts.UseOptimisticConcurrency,
		NoCaching:                opts.NoCaching,
		byID:                     map[string]*docInfo{},
		byEntity:                 map[uintptr]*docInfo{},
		deleted:                  map[string]*deletion{},
		included:                 map[string]json.RawMessage{},
	}
}

// Context returns the context the session's requests use.
func (s *Session) Context() context.Context { return s.ctx }

// NumberOfRequests is the number of server requests this session made
// (HiLo range fetches not included).
func (s *Session) NumberOfRequests() int { return s.requests }

// metadata keys the server computes; they are never sent back.
var serverMetadataKeys = []string{"@id", "@change-vector", "@last-modified", "@flags", "@index-score", "@projection", "@counters", "@attachments", "@timeseries", "@revisions"}

// entityRef validates an entity and returns its pointer value, type info and
// tracking key. Entities are non-nil pointers to structs, or non-nil maps
// with string keys.
func (s *Session) entityRef(entity any) (reflect.Value, *typeInfo, uintptr, error) {
	v := reflect.ValueOf(entity)
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct:
		return v, s.store.types.get(v.Elem().Type()), v.Pointer(), nil
	case v.Kind() == reflect.Map && !v.IsNil() && v.Type().Key().Kind() == reflect.String:
		return v, s.store.types.get(v.Type()), v.Pointer(), nil
	}
	return reflect.Value{}, nil, 0, fmt.Errorf("rookery: entity must be a non-nil pointer to a struct or a map with string keys, got %T", entity)
}

func (s *Session) checkOpen() error {
	if s.store.urlErr != nil {
		return s.store.urlErr
	}
	if s.store.closed.Load() {
		return ErrStoreClosed
	}
	return nil
}

func (s *Session) isServerSideID(id string) bool {
	return id == "" || strings.HasSuffix(id, "|") || strings.HasSuffix(id, s.store.conv.IdentityPartsSeparator)
}

// Store adds a new entity to the session. Its id comes from the entity's id
// field when that is set; otherwise a HiLo id is assigned at once (and
// written to the id field) for types with a collection and an id field.
// Entities without either get a GUID id from the server on SaveChanges.
// Storing an entity the session already tracks does nothing.
func (s *Session) Store(entity any) error {
	return s.store1(entity, "", false, nil)
}

// StoreWithID stores an entity under the given id. An id ending in "|"
// ("companies|") asks the server for the next identity ("companies/1"); an
// id ending in the separator ("companies/") for a server-generated id. In
// both cases the entity's id field is set from the server's answer after
// SaveChanges.
func (s *Session) StoreWithID(entity any, id string) error {
	if id == "" {
		return s.store1(entity, "", false, nil)
	}
	return s.store1(entity, id, true, nil)
}

// StoreWithChangeVector stores an entity under id and makes SaveChanges
// succeed only if the document's current change vector is changeVector (""
// means the document must not exist).
func (s *Session) StoreWithChangeVector(entity any, id, changeVector string) error {
	cv := changeVector
	return s.store1(entity, id, id != "", &cv)
}

func (s *Session) store1(entity any, id string, explicit bool, cv *string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	v, ti, key, err := s.entityRef(entity)
	if err != nil {
		return err
	}
	if info, ok := s.byEntity[key]; ok {
		if explicit && id != info.id {
			return fmt.Errorf("rookery: entity is already tracked with id %q, cannot store it as %q", info.id, id)
		}
		if cv != nil {
			info.expectedCV = cv
		}
		return nil
	}
	if !explicit {
		id = getEntityID(v, ti)
		if id == "" && ti.idField != nil && ti.tag != "" {
			id, err = s.store.hilo.generator(ti.tag).nextID(s.ctx)
			if err != nil {
				err = fmt.Errorf("rookery: Store could not take an id for a %s: %w", ti.tag, err)
				s.storeErr = errors.Join(s.storeErr, err)
				return err
			}
		}
	}
	serverID := s.isServerSideID(id)
	if !serverID {
		lid := strings.ToLower(id)
		if _, ok := s.deleted[lid]; ok {
			return fmt.Errorf("%w: %s", ErrDeleted, id)
		}
		if _, ok := s.byID[lid]; ok {
			return fmt.Errorf("%w: %s", ErrNonUniqueObject, id)
		}
		setEntityID(v, ti, id)
	}
	info := &docInfo{
		id:         id,
		entity:     entity,
		ptr:        v,
		ti:         ti,
		metadata:   s.newMetadata(v, ti),
		isNew:      true,
		serverID:   serverID,
		expectedCV: cv,
	}
	s.track(key, info)
	return nil
}

func (s *Session) newMetadata(v reflect.Value, ti *typeInfo) map[string]any {
	md := map[string]any{}
	if ti.isMap {
		mv := v.MapIndex(reflect.ValueOf("@metadata"))
		if !mv.IsValid() {
			return md
		}
		if m, ok := mv.Interface().(map[string]any); ok {
			for k, x := range m {
				if !contains(serverMetadataKeys, k) {
					md[k] = x
				}
			}
		}
		return md
	}
	if ti.collection != "" {
		md["@collection"] = ti.collection
	}
	if ti.goType != "" {
		md[GoTypeMetadataKey] = ti.goType
	}
	return md
}

func (s *Session) track(key uintptr, info *docInfo) {
	s.byEntity[key] = info
	if !info.serverID {
		s.byID[strings.ToLower(info.id)] = info
	}
	s.order = append(s.order, info)
}

func (s *Session) untrack(info *docInfo) {
	info.removed = true
	delete(s.byEntity, info.ptr.Pointer())
	if !info.serverID {
		if cur := s.byID[strings.ToLower(info.id)]; cur == info {
			delete(s.byID, strings.ToLower(info.id))
		}
	}
}

func getEntityID(v reflect.Value, ti *typeInfo) string {
	if ti.idField == nil {
		return ""
	}
	f, err := v.Elem().FieldByIndexErr(ti.idField)
	if err != nil {
		return ""
	}
	return f.String()
}

func setEntityID(v reflect.Value, ti *typeInfo, id string) {
	if ti.idField == nil {
		return
	}
	f, err := v.Elem().FieldByIndexErr(ti.idField)
	if err != nil || !f.CanSet() {
		return
	}
	f.SetString(id)
}

// Delete marks the document id for deletion on SaveChanges. A tracked
// entity with that id stops being tracked.
func (s *Session) Delete(id string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if id == "" {
		return errors.New("rookery: Delete needs an id")
	}
	lid := strings.ToLower(id)
	if _, ok := s.deleted[lid]; ok {
		return nil
	}
	d := &deletion{id: id}
	if info, ok := s.byID[lid]; ok {
		if info.expectedCV != nil {
			d.cv = info.expectedCV
		} else if s.UseOptimisticConcurrency && !info.isNew {
			cv := info.changeVector
			d.cv = &cv
		}
		s.untrack(info)
	}
	delete(s.included, lid)
	s.deleted[lid] = d
	s.deleteOrder = append(s.deleteOrder, d)
	return nil
}

// DeleteEntity marks a tracked entity for deletion on SaveChanges.
func (s *Session) DeleteEntity(entity any) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	_, _, key, err := s.entityRef(entity)
	if err != nil {
		return err
	}
	info, ok := s.byEntity[key]
	if !ok {
		return ErrNotTracked
	}
	if info.serverID {
		// never saved: there is nothing on the server to delete
		s.untrack(info)
		return nil
	}
	return s.Delete(info.id)
}

// Evict stops tracking an entity: its changes are not saved.
func (s *Session) Evict(entity any) {
	if _, _, key, err := s.entityRef(entity); err == nil {
		if info, ok := s.byEntity[key]; ok {
			s.untrack(info)
		}
	}
}

// Clear forgets every tracked entity and pending delete.
func (s *Session) Clear() {
	s.byID = map[string]*docInfo{}
	s.byEntity = map[uintptr]*docInfo{}
	s.order = nil
	s.deleted = map[string]*deletion{}
	s.deleteOrder = nil
	s.included = map[string]json.RawMessage{}
}

func (s *Session) infoFor(entity any) (*docInfo, error) {
	_, _, key, err := s.entityRef(entity)
	if err != nil {
		return nil, err
	}
	info, ok := s.byEntity[key]
	if !ok {
		return nil, ErrNotTracked
	}
	return info, nil
}

// GetMetadataFor returns the metadata of a tracked entity. The map is live:
// changes to it are saved by SaveChanges.
func (s *Session) GetMetadataFor(entity any) (map[string]any, error) {
	info, err := s.infoFor(entity)
	if err != nil {
		return nil, err
	}
	return info.metadata, nil
}

// GetChangeVectorFor returns the change vector of a tracked entity as the
// server last reported it ("" for an entity not saved yet).
func (s *Session) GetChangeVectorFor(entity any) (string, error) {
	info, err := s.infoFor(entity)
	if err != nil {
		return "", err
	}
	return info.changeVector, nil
}

// GetDocumentID returns the id of a tracked entity ("" if it is not tracked
// or its id will be assigned by the server on SaveChanges).
func (s *Session) GetDocumentID(entity any) string {
	info, err := s.infoFor(entity)
	if err != nil || info.serverID {
		return ""
	}
	return info.id
}

// IsLoaded reports whether the session tracks a document with this id.
func (s *Session) IsLoaded(id string) bool {
	_, ok := s.byID[strings.ToLower(id)]
	return ok
}

// serialize renders a tracked entity as the document JSON sent to the
// server: its JSON without the id field, then @metadata.
func (s *Session) serialize(info *docInfo) ([]byte, error) {
	metaJSON, err := metadataJSON(info)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(info.entity)
	if err != nil {
		return nil, fmt.Errorf("rookery: serialising %q: %w", info.id, err)
	}
	var skip []string
	if info.ti.isMap {
		skip = []string{"@metadata"}
	} else if info.ti.idJSONName != "" {
		skip = []string{info.ti.idJSONName}
	}
	return rebuildObject(raw, skip, metaJSON)
}

// metadataJSON renders the metadata sent for a document: every key but the
// server-computed ones. The common case (just @collection and the Go type)
// is rendered once per type.
func metadataJSON(info *docInfo) ([]byte, error) {
	ti := info.ti
	if ti.defaultMeta != nil {
		plain, n := true, 0
		for k, v := range info.metadata {
			switch k {
			case "@collection":
				plain = plain && v == any(ti.collection)
				n++
			case GoTypeMetadataKey:
				plain = plain && v == any(ti.goType)
				n++
			default:
				plain = plain && contains(serverMetadataKeys, k)
			}
		}
		if plain && n == 2 {
			return ti.defaultMeta, nil
		}
	}
	meta := make(map[string]any, len(info.metadata))
	for k, v := range info.metadata {
		if !contains(serverMetadataKeys, k) {
			meta[k] = v
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("rookery: metadata of %q: %w", info.id, err)
	}
	return b, nil
}

// HasChanges reports whether SaveChanges would send anything.
func (s *Session) HasChanges() bool {
	if len(s.deleteOrder) > 0 {
		return true
	}
	for _, info := range s.order {
		if info.removed {
			continue
		}
		if changed, err := s.changed(info); err != nil || changed {
			return true
		}
	}
	return false
}

// HasChanged reports whether a tracked entity differs from what was loaded
// or last saved (new entities have always changed).
func (s *Session) HasChanged(entity any) bool {
	info, err := s.infoFor(entity)
	if err != nil {
		return false
	}
	changed, err := s.changed(info)
	return err != nil || changed
}

func (s *Session) changed(info *docInfo) (bool, error) {
	if info.isNew || info.expectedCV != nil {
		return true, nil
	}
	doc, err := s.serialize(info)
	if err != nil {
		return true, err
	}
	return !bytes.Equal(doc, info.snapshot), nil
}

// batchCommand is one command of POST bulk_docs.
type batchCommand struct {
	ID                   *string         `json:"Id"`
	ChangeVector         *string         `json:"ChangeVector"`
	OriginalChangeVector *string         `json:"OriginalChangeVector,omitempty"`
	Document             json.RawMessage `json:"Document,omitempty"`
	Type                 string          `json:"Type"`
	// PATCH commands (see patch.go).
	Patch          *PatchRequest `json:"Patch,omitempty"`
	ReturnDocument bool          `json:"ReturnDocument,omitempty"`
}

type batchBody struct {
	Commands []batchCommand `json:"Commands"`
}

// SaveChanges sends every change of the unit of work (new, modified and
// deleted documents) to the server in one POST bulk_docs request, which the
// server applies as one transaction. Nothing is sent when nothing changed.
// On success, server-assigned ids and change vectors are written back to
// the entities; on failure the session is left as it was. When a Store of
// this session failed (no id could be taken: a missing database, no
// reachable node), SaveChanges sends nothing and returns that error, even if
// the caller ignored it from Store.
func (s *Session) SaveChanges() error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := s.storeErr; err != nil {
		// Nothing is sent: the unit of work lost an entity. The error is
		// reported once; what was stored successfully stays tracked.
		s.storeErr = nil
		return err
	}
	var cmds []batchCommand
	var puts []*docInfo // parallel to the PUT commands
	var docs [][]byte
	for _, d := range s.deleteOrder {
		id := d.id
		cmds = append(cmds, batchCommand{ID: &id, ChangeVector: d.cv, Type: "DELETE"})
	}
	for _, info := range s.order {
		if info.removed {
			continue
		}
		doc, err := s.serialize(info)
		if err != nil {
			return err
		}
		if !info.isNew && info.expectedCV == nil && bytes.Equal(doc, info.snapshot) {
			continue // unchanged
		}
		docs = append(docs, doc)
		cmd := batchCommand{Type: "PUT", Document: docs[len(docs)-1]}
		if info.id != "" {
			id := info.id
			cmd.ID = &id
		}
		switch {
		case info.expectedCV != nil:
			cv := *info.expectedCV
			cmd.ChangeVector = &cv
		case s.UseOptimisticConcurrency && info.isNew:
			empty := ""
			cmd.ChangeVector = &empty
		case s.UseOptimisticConcurrency:
			cv := info.changeVector
			cmd.ChangeVector = &cv
		}
		if info.changeVector != "" {
			cv := info.changeVector
			cmd.OriginalChangeVector = &cv
		}
		cmds = append(cmds, cmd)
		puts = append(puts, info)
	}
	nPatch := len(cmds)
	cmds = append(cmds, s.patchCommands()...)
	if len(cmds) == 0 {
		return nil
	}
	body, err := json.Marshal(batchBody{Commands: cmds})
	if err != nil {
		return err
	}
	s.requests++
	resp, err := s.store.executor.execute(s.ctx, &request{
		method: http.MethodPost, path: "/bulk_docs", query: s.batchQuery(), body: body, dbScoped: true,
	})
	if err != nil {
		return err
	}
	if resp.status < 200 || resp.status >= 300 {
		return fmt.Errorf("rookery: bulk_docs: unexpected status %d", resp.status)
	}
	var out struct {
		Results []map[string]any `json:"Results"`
	}
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return fmt.Errorf("rookery: bulk_docs: %w", err)
	}
	if len(out.Results) != len(cmds) {
		return fmt.Errorf("rookery: bulk_docs: %d results for %d commands", len(out.Results), len(cmds))
	}
	nDel := len(s.deleteOrder)
	for _, d := range s.deleteOrder {
		delete(s.deleted, strings.ToLower(d.id))
	}
	s.deleteOrder = nil
	for i, info := range puts {
		s.applyPutResult(info, out.Results[nDel+i], docs[i])
	}
	s.applyPatchResults(out.Results[nPatch:])
	// compact the tracking order
	kept := s.order[:0]
	for _, info := range s.order {
		if !info.removed {
			kept = append(kept, info)
		}
	}
	s.order = kept
	return nil
}

func (s *Session) applyPutResult(info *docInfo, res map[string]any, sent []byte) {
	id, _ := res["@id"].(string)
	if id == "" {
		id = info.id
	}
	if info.serverID {
		info.serverID = false
		info.id = id
		if _, taken := s.byID[strings.ToLower(id)]; !taken {
			s.byID[strings.ToLower(id)] = info
		}
	} else if id != info.id {
		delete(s.byID, strings.ToLower(info.id))
		info.id = id
		s.byID[strings.ToLower(id)] = info
	}
	if !info.ti.isMap {
		setEntityID(info.ptr, info.ti, id)
	}
	metaChanged := false
	for k, v := range res {
		if k == "Type" {
			continue
		}
		old, had := info.metadata[k]
		if k == "@collection" && !had && v == "@empty" {
			continue
		}
		if !contains(serverMetadataKeys, k) && (!had || !reflect.DeepEqual(old, v)) {
			metaChanged = true
		}
		info.metadata[k] = v
	}
	if cv, ok := res["@change-vector"].(string); ok {
		info.changeVector = cv
	}
	info.isNew = false
	info.expectedCV = nil
	// The snapshot is what was sent, unless the server's answer changed
	// metadata that is sent back (server-computed keys are never sent).
	info.snapshot = sent
	if metaChanged {
		if doc, err := s.serialize(info); err == nil {
			info.snapshot = doc
		}
	}
}

// Exists reports whether a document exists (HEAD request; the document is
// not loaded).
func (s *Session) Exists(id string) (bool, error) {
	if err := s.checkOpen(); err != nil {
		return false, err
	}
	lid := strings.ToLower(id)
	if _, ok := s.deleted[lid]; ok {
		return false, nil
	}
	if info, ok := s.byID[lid]; ok && !info.isNew {
		return true, nil
	}
	s.requests++
	resp, err := s.store.executor.execute(s.ctx, &request{
		method: http.MethodHead, path: "/docs", query: "id=" + url.QueryEscape(id), dbScoped: true,
	})
	if err != nil {
		return false, err
	}
	return resp.status >= 200 && resp.status < 300 || resp.status == http.StatusNotModified, nil
}
