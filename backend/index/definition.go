// Package index builds and queries one database's indexes: each index is its
// own SQLite file beside the database's, filled by its own writer from the
// database's etag order (see DESIGN.md).
package index

import "time"

// Index types, as RavenDB names them on the wire (IndexDefinition.Type).
const (
	TypeAutoMap             = "AutoMap"
	TypeAutoMapReduce       = "AutoMapReduce"
	TypeJavaScriptMap       = "JavaScriptMap"
	TypeJavaScriptMapReduce = "JavaScriptMapReduce"
)

// States (IndexState on the wire).
const (
	StateNormal   = "Normal"
	StateIdle     = "Idle"
	StateDisabled = "Disabled"
	StateError    = "Error"
)

// AllDocs is the collection name of an index over every collection
// ("from @all_docs", map('@all_docs', ...)).
const AllDocs = "@all_docs"

// Definition is an index's definition: what the cluster state keeps (as
// JSON) so every node builds the same index over its own copy.
type Definition struct {
	Name string
	Type string // one of the Type constants

	// Auto indexes (made by the query planner).
	//
	// Collection is the one collection an auto index reads (AllDocs for
	// every collection). Fields are the indexed fields sorted by Name;
	// GroupBy (auto map-reduce) are the group-by paths, and the fields
	// with an Aggregation are the aggregated outputs.
	Collection string      `json:",omitempty"`
	Fields     []AutoField `json:",omitempty"`
	GroupBy    []string    `json:",omitempty"`

	// Static (JavaScript) indexes, as the client sends them.
	Maps          []string                `json:",omitempty"`
	Reduce        string                  `json:",omitempty"`
	FieldOptions  map[string]FieldOptions `json:",omitempty"` // the wire's "Fields"
	Configuration map[string]string       `json:",omitempty"`

	LockMode string `json:",omitempty"` // Unlock (default), LockedIgnore, LockedError
	Priority string `json:",omitempty"` // Low, Normal (default), High
	// State is the state the cluster decided: Normal, Idle or Disabled
	// (Error is a node's own finding, reported in stats, not stored here).
	State   string    `json:",omitempty"`
	Created time.Time `json:",omitempty"`
	// Superseded names the wider auto index that replaces this one: it is
	// deleted once that index has caught up.
	Superseded string `json:",omitempty"`
}

// AutoField is one field of an auto index.
type AutoField struct {
	Name   string // path as written in the query: Name, Address.City, Lines[].Price
	Search bool   `json:",omitempty"` // full-text (search())
	Exact  bool   `json:",omitempty"` // exact()
	// Aggregation is "Count" or "Sum" for an auto map-reduce output field.
	Aggregation string `json:",omitempty"`
}

// FieldOptions are a static index field's options (IndexFieldOptions).
type FieldOptions struct {
	Storage     string `json:",omitempty"` // Yes, No
	Indexing    string `json:",omitempty"` // Exact, Search, No, Default
	Analyzer    string `json:",omitempty"`
	TermVector  string `json:",omitempty"`
	Suggestions bool   `json:",omitempty"`
}

// IsAuto tells whether the query planner made the index.
func (d *Definition) IsAuto() bool {
	return d.Type == TypeAutoMap || d.Type == TypeAutoMapReduce
}
