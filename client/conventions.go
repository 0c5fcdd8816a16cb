package client

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Conventions tune how a DocumentStore names collections, builds ids and
// talks to the server. Change them on store.Conventions before the store is
// first used; the store takes a copy at its first operation and ignores later
// changes.
type Conventions struct {
	// FindCollectionName returns the collection of a Go type ("" for none).
	// The type is never a pointer. Default: DefaultCollectionName.
	FindCollectionName func(t reflect.Type) string

	// TransformCollectionNameToDocumentIDPrefix turns a collection name into
	// the id prefix, which is also the HiLo tag. Default:
	// DefaultTransformCollectionNameToDocumentIDPrefix.
	TransformCollectionNameToDocumentIDPrefix func(collection string) string

	// FindIdentityProperty reports whether a struct field holds the
	// document id. Only exported string fields are offered. Default:
	// DefaultFindIdentityProperty.
	FindIdentityProperty func(f reflect.StructField) bool

	// FindGoTypeName gives the value of the type hint stored in metadata
	// (GoTypeMetadataKey). Default: the type's package-qualified name, e.g.
	// "shop.Order".
	FindGoTypeName func(t reflect.Type) string

	// IdentityPartsSeparator separates the parts of generated ids
	// ("orders/1-A"). Default "/". It may not be "|".
	IdentityPartsSeparator string

	// UseOptimisticConcurrency is the default of the session option of the
	// same name.
	UseOptimisticConcurrency bool

	// DisableTopologyUpdates makes the request executor use the store's
	// URLs as they are, never fetching /topology.
	DisableTopologyUpdates bool

	// MaxHTTPCacheSize bounds the HTTP cache, in bytes of cached bodies.
	// 0 means the default (32 MiB); a negative value disables the cache.
	MaxHTTPCacheSize int64

	// RequestTimeout bounds one HTTP request to one node. Default 30 s.
	RequestTimeout time.Duration

	// CloseTimeout bounds how long Close waits for HiLo returns. Default 5 s.
	CloseTimeout time.Duration

	// HTTPClient is used for every request when set. By default the store
	// makes its own client with keep-alive connections (and Certificate and
	// TrustedCAs in its TLS configuration; a client given here brings its
	// own, while subscription workers still use Certificate and TrustedCAs).
	HTTPClient *http.Client

	// Certificate is the client certificate presented to the nodes: on a
	// secured cluster (https URLs) it is the application's identity, and
	// its registration decides what it may do (see LoadCertificate). It is
	// used for every request (topology, failover, operations) and for
	// subscription workers. A certificate with http URLs is refused, as in
	// RavenDB's clients. Without one, a secured node answers every
	// request but whoami with a 403, an *AuthorizationError.
	Certificate *tls.Certificate

	// TrustedCAs are the authorities the nodes' certificates must chain to
	// (the cluster's ca.pem, see LoadTrustedCAs). Nil trusts the system's
	// roots only.
	TrustedCAs *x509.CertPool

	// OnRequest, when set, is called after every HTTP request the store
	// makes (including failed attempts), from the goroutine that made it.
	OnRequest func(RequestEvent)
}

// RequestEvent describes one HTTP request made by a store.
type RequestEvent struct {
	Method     string
	URL        string // full URL, including the node's base URL
	StatusCode int    // 0 on a network error
	FromCache  bool   // a 304 answered from the HTTP cache
	Err        error  // network error, if any
	Duration   time.Duration
}

// GoTypeMetadataKey is the metadata key holding the Go type of an entity.
const GoTypeMetadataKey = "Raven-Go-Type"

// DefaultConventions returns the default conventions.
func DefaultConventions() *Conventions {
	return &Conventions{
		FindCollectionName:                        DefaultCollectionName,
		TransformCollectionNameToDocumentIDPrefix: DefaultTransformCollectionNameToDocumentIDPrefix,
		FindIdentityProperty:                      DefaultFindIdentityProperty,
		FindGoTypeName:                            defaultGoTypeName,
		IdentityPartsSeparator:                    "/",
		MaxHTTPCacheSize:                          32 << 20,
		RequestTimeout:                            30 * time.Second,
		CloseTimeout:                              5 * time.Second,
	}
}

// withDefaults returns a copy of c with unset fields filled in.
func (c *Conventions) withDefaults() *Conventions {
	d := DefaultConventions()
	if c == nil {
		return d
	}
	out := *c
	if out.FindCollectionName == nil {
		out.FindCollectionName = d.FindCollectionName
	}
	if out.TransformCollectionNameToDocumentIDPrefix == nil {
		out.TransformCollectionNameToDocumentIDPrefix = d.TransformCollectionNameToDocumentIDPrefix
	}
	if out.FindIdentityProperty == nil {
		out.FindIdentityProperty = d.FindIdentityProperty
	}
	if out.FindGoTypeName == nil {
		out.FindGoTypeName = d.FindGoTypeName
	}
	if out.IdentityPartsSeparator == "" || out.IdentityPartsSeparator == "|" {
		out.IdentityPartsSeparator = d.IdentityPartsSeparator
	}
	if out.MaxHTTPCacheSize == 0 {
		out.MaxHTTPCacheSize = d.MaxHTTPCacheSize
	}
	if out.RequestTimeout <= 0 {
		out.RequestTimeout = d.RequestTimeout
	}
	if out.CloseTimeout <= 0 {
		out.CloseTimeout = d.CloseTimeout
	}
	return &out
}

// DefaultCollectionName is the plural of the type's name, with its case kept:
// Company → Companies, Person → People, OrderLine → OrderLines. Type
// arguments of generic types are dropped (Box[int] → Boxes). Unnamed types
// (maps, anonymous structs) have no collection.
func DefaultCollectionName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	if name == "" {
		return ""
	}
	return Pluralize(name)
}

// DefaultTransformCollectionNameToDocumentIDPrefix lower-cases a collection
// name that has at most one upper-case letter and keeps any other as it is:
// Companies → companies, OrderLines → OrderLines.
func DefaultTransformCollectionNameToDocumentIDPrefix(collection string) string {
	upper := 0
	for _, r := range collection {
		if unicode.IsUpper(r) {
			upper++
			if upper > 1 {
				return collection
			}
		}
	}
	return strings.ToLower(collection)
}

// DefaultFindIdentityProperty accepts a field tagged `rookery:"id"`, a field
// named ID or Id, or a field whose JSON name is "id" (any case).
func DefaultFindIdentityProperty(f reflect.StructField) bool {
	if tagName(f.Tag.Get("rookery")) == "id" {
		return true
	}
	if f.Name == "ID" || f.Name == "Id" {
		return true
	}
	return strings.EqualFold(tagName(f.Tag.Get("json")), "id")
}

func defaultGoTypeName(t reflect.Type) string { return t.String() }

func tagName(tag string) string {
	if i := strings.IndexByte(tag, ','); i >= 0 {
		return tag[:i]
	}
	return tag
}

// typeInfo is what the store needs to know about an entity type. It is
// computed once per type.
type typeInfo struct {
	typ        reflect.Type // the struct (or map) type, not the pointer
	isMap      bool
	collection string
	tag        string // id prefix / HiLo tag
	goType     string
	idField    []int  // index path of the id field; nil when none
	idJSONName string // JSON key of the id field ("" when not serialised)
	// defaultMeta is the JSON of the metadata of a new entity of this type
	// ({"@collection":…,"Raven-Go-Type":…}); nil for maps.
	defaultMeta []byte
}

type typeCache struct {
	conv *Conventions
	m    sync.Map // reflect.Type → *typeInfo
}

func (c *typeCache) get(t reflect.Type) *typeInfo {
	if v, ok := c.m.Load(t); ok {
		return v.(*typeInfo)
	}
	ti := c.build(t)
	v, _ := c.m.LoadOrStore(t, ti)
	return v.(*typeInfo)
}

func (c *typeCache) build(t reflect.Type) *typeInfo {
	ti := &typeInfo{typ: t}
	switch t.Kind() {
	case reflect.Map:
		ti.isMap = true
		return ti
	case reflect.Struct:
	default:
		return ti
	}
	ti.collection = c.conv.FindCollectionName(t)
	if ti.collection != "" {
		ti.tag = c.conv.TransformCollectionNameToDocumentIDPrefix(ti.collection)
	}
	ti.goType = c.conv.FindGoTypeName(t)
	if ti.collection != "" && ti.goType != "" {
		ti.defaultMeta, _ = json.Marshal(map[string]string{"@collection": ti.collection, GoTypeMetadataKey: ti.goType})
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous || f.Type.Kind() != reflect.String {
			continue
		}
		if !c.conv.FindIdentityProperty(f) {
			continue
		}
		ti.idField = f.Index
		ti.idJSONName = jsonFieldName(f)
		break
	}
	return ti
}

// jsonFieldName is the key encoding/json uses for f, or "" if f is skipped.
func jsonFieldName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	if n := tagName(tag); n != "" {
		return n
	}
	return f.Name
}
