package index

// The package's public surface, in one place. Implementations live in the
// other files of the package; DESIGN.md says why it is built this way.

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/rookerydb/rookery/backend/rql"
)

// Options tune an index (and a Manager's indexes). Zero values take the
// defaults named on each field.
type Options struct {
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// BatchSize bounds the documents (map, tombstone and reference work
	// items together) one index transaction handles; 8192 when zero.
	BatchSize int
	// BatchTime bounds how long one index transaction runs; 1s when zero.
	BatchTime time.Duration
	// MapTimeout bounds the JavaScript run for one document (map, or the
	// reduce of one group); 5s when zero. The definition's Configuration
	// "Indexing.MapTimeoutInSec" overrides it per index.
	MapTimeout time.Duration
	// WritePause: while the database is taking writes, an index's writer
	// rests this long after each millisecond of work (it yields the
	// processor after every document regardless), so document writes keep
	// their latency on a small machine; 1ms when zero (indexing then takes
	// at most about half a core while writes arrive), no rest when negative.
	WritePause time.Duration
	// MaxErrors is how many per-document errors an index keeps (the oldest
	// go first); 500 when zero.
	MaxErrors int
	// ErrorRate: once an index made at least 100 map attempts and more than
	// this fraction of them failed, it goes to StateError and stops
	// indexing until Reset or a new definition; 0.5 when zero, never when
	// negative.
	ErrorRate float64
	// Now is the clock (created time, error timestamps, last indexing
	// time); time.Now when nil.
	Now func() time.Time
	// OnChange, when set, hears of index changes (the Changes API's
	// IndexChange): a batch committed, an index added or removed. It runs
	// on the index's writer or the caller of Put/Delete and must not block.
	OnChange func(Event)
}

// Event is an index change for Options.OnChange.
type Event struct {
	Database string
	Index    string
	Type     string // "BatchCompleted", "IndexAdded" or "IndexRemoved"
	Etag     int64  // the last document etag indexed (BatchCompleted)
}

// Index is one open index: its SQLite file, its writer goroutine and its
// searcher. Every method is safe for concurrent use.
//
// Methods (implemented in index.go, worker.go, search.go):
//
//	Open(path string, def Definition, db *storage.DB, opts Options) (*Index, error)
//	    Opens (creating if needed) the index file at path (use FilePath to
//	    place it), validates def (Validate), checks the file (a torn or
//	    foreign file, or one built from another definition, is rebuilt from
//	    scratch) and starts the writer goroutine, which indexes everything
//	    after the persisted etags. It does not wait for indexing.
//	(*Index) Close() error
//	    Stops the writer (finishing the transaction in flight) and closes the file.
//	(*Index) Reset() error
//	    Drops every entry, reference and etag and indexes from scratch
//	    (clears StateError, the error list and a pause).
//	(*Index) Pause(reason string) error
//	    Stops this node's indexing of it between two documents (the
//	    transaction in flight rolls back) until Resume or Reset; the reason
//	    is persisted in the file, listed in the stale reasons ("Indexing is
//	    paused on this node: ...") and in Stats.Paused.
//	(*Index) Resume() (bool, error)   ends a pause (false: it was not paused)
//	(*Index) PauseReason() string     "" when not paused
//	(*Index) Name() string
//	(*Index) Definition() Definition
//	(*Index) Wake()
//	    Tells the writer there may be new work (the Manager calls it on
//	    every commit of the database; callers rarely need it).
//	(*Index) Stale(ctx) (bool, []string)
//	    Whether the index is stale and why, one readable sentence per reason
//	    ("There are still some documents to process from collection 'Pets'",
//	    "There are still some document references to process from collection
//	    'People'", "The index is disabled", ...). Rule: non-stale only when
//	    every source collection's processed document etag reached the
//	    collection's last document etag and its processed tombstone etag the
//	    last tombstone etag, and for every referenced collection both
//	    reference watermarks did the same.
//	(*Index) WaitNonStale(ctx, cutoffEtag int64) error
//	    Waits until no document, tombstone or referenced document with an
//	    etag <= cutoffEtag (the database's LastEtag when the query started;
//	    <= 0 means "now", i.e. Stale) is still to be processed. Returns
//	    ctx.Err() on timeout, or the index's error when it is in StateError
//	    or disabled (a *dberr.Error, InvalidOperation).
//	(*Index) Stats() Stats
//	(*Index) Errors() []IndexingError        oldest first
//	(*Index) ClearErrors()
//	(*Index) ResultEtag() int64
//	    A hash of the definition, the processed etags of every source
//	    collection and every reference watermark: it changes whenever the
//	    index's answers can change.
//	(*Index) LastIndexedEtag() int64
//	    The highest document/tombstone etag the index processed (any collection).
//	(*Index) MarkQueried(t time.Time)   records the last query time
//	(*Index) LastQueried() time.Time    zero when never queried since open
//	(*Index) Fields() []string
//	    The queryable field names (auto: AutoField names/paths as written in
//	    the query, e.g. "Address.City", "Lines[].Price"; JS: the keys the maps
//	    returned so far; map-reduce: the reduce output keys).
//	(*Index) Search(ctx, q SearchQuery) (*SearchResult, error)
//	    Runs a where/order/paging over the index's tables (see SearchQuery).
//	    Errors: a *dberr.Error BadRequest for an unknown parameter, a bad
//	    regex, a type the operator cannot take.
//
// Package functions:
//
//	FilePath(dbPath, indexName string) string
//	    <dir of dbPath>/indexes/<FileName(indexName)>
//	FileName(indexName string) string
//	    lower-case, [a-z0-9._-] kept, others '_', cut to 64 bytes, plus
//	    "-<8 hex of sha256(name)>.db": two names never share a file.
//	Validate(def *Definition) error
//	    Name (names.Index), Type, fields; a JavaScript definition is compiled
//	    (maps and reduce) so syntax errors come back at definition time as a
//	    *DefinitionError (Reason "Compilation"); a C#/LINQ definition (Maps[0]
//	    trimmed starts with "from" or "docs") is a *DefinitionError with Reason
//	    "NotSupported". Both unwrap to dberr.BadRequest (400).
//	NewManager(opts Options) *Manager (see manager.go)
//
// Manager methods (manager.go):
//
//	(*Manager) Put(db *storage.DB, def Definition) (*Index, error)
//	    Opens or creates the index of db.Name() and starts it; an unchanged
//	    definition returns the open index; a changed one (other than State,
//	    Priority, LockMode, Superseded, which are applied in place) rebuilds.
//	    Subscribes once per *storage.DB to its commits to wake its indexes.
//	(*Manager) Delete(dbName, name string) error   closes it and removes its files
//	(*Manager) Get(dbName, name string) (*Index, bool)
//	(*Manager) List(dbName string) []*Index        sorted by name
//	(*Manager) CloseDatabase(dbName string) error  closes (keeps files) that database's indexes
//	(*Manager) Close() error                       closes every index

// SearchQuery is one query over an index.
type SearchQuery struct {
	// Where is the parsed where clause (nil: every entry). Supported:
	// Compare (= != < <= > >=, Exact), Between, In (All), Call startsWith /
	// endsWith / search / regex, Exists, And / Or / Not. Paths name index
	// fields (Path.String(): "Name", "Address.City", "Tags[]"... a path
	// "Tags" also finds the field "Tags[]" and vice versa); Path.ID (id())
	// compares the document id case-insensitively. search() with the "and"
	// operator needs every term: the operator is read from a string field
	// named Op or Operator of rql.Call when the grammar has one ("and" or
	// "or"; "" means or).
	Where rql.Expr
	// Params are the $parameters (numbers may be any Go numeric type).
	Params map[string]any
	// OrderBy: field asc/desc with As "long"/"double" (numeric order),
	// "alphaNumeric"/"string"/"" (lower-cased text order; numbers before
	// strings); score() (Path "score" with no segments is not valid; the
	// runner passes score() as a Field with Segments ["score()"]) and
	// anything unknown fall back to index order; Random shuffles.
	// Ties keep index order (insertion order of entries).
	OrderBy []rql.Order
	// Skip and Take page the results; Take < 0 means no limit, 0 returns
	// no hits (TotalResults is still counted).
	Skip, Take int
}

// SearchResult is what Search found.
type SearchResult struct {
	Hits []Hit
	// TotalResults counts every match (before Skip/Take); for map indexes a
	// document that produced several matching entries counts once.
	TotalResults int64
	// SkippedResults counts duplicate entries of one document that were
	// dropped from the page (RavenDB's meaning).
	SkippedResults int64
}

// Hit is one result.
type Hit struct {
	// DocID is the document's id for map indexes; "" for map-reduce.
	DocID string
	// Stored holds, for map indexes, the entry's stored fields (FieldOptions
	// Storage "Yes") as a JSON object, nil when none; for map-reduce, the
	// whole reduced row (every output key) as a JSON object.
	Stored json.RawMessage
}

// Stats is an index's figures (IndexStats on the wire).
type Stats struct {
	Name  string
	Type  string
	State string // Normal, Idle, Disabled, Error
	// Paused is why indexing is paused on this node (Index.Pause), "" when
	// it is not; the State stays the definition's.
	Paused string
	// Entries: map indexes: index entries (one document may make several);
	// map-reduce: reduced rows.
	EntriesCount int64
	// Collections are the source collections (AllDocs for @all_docs).
	Collections map[string]CollectionStats
	// References are the (source, referenced) collection pairs load() used.
	References []ReferenceStats
	// ReferencesHeld is how many (document -> referenced document) rows the
	// index keeps.
	ReferencesHeld int64

	MapAttempts, MapSuccesses, MapErrors                            int64 // since open
	MapReferenceAttempts, MapReferenceSuccesses, MapReferenceErrors int64 // re-maps caused by referenced documents, since open
	ReduceAttempts, ReduceSuccesses, ReduceErrors                   int64 // groups reduced, since open
	ErrorsCount                                                     int

	IsStale      bool
	StaleReasons []string

	CreatedTimestamp time.Time
	LastIndexingTime time.Time // zero when nothing was indexed since open
	LastQueryingTime time.Time // zero when never queried since open
	SizeOnDisk       int64
}

// CollectionStats is one source collection's progress.
type CollectionStats struct {
	LastProcessedDocumentEtag  int64
	LastProcessedTombstoneEtag int64
	DocumentLag                int64 // documents after LastProcessedDocumentEtag
	TombstoneLag               int64 // tombstones after LastProcessedTombstoneEtag
}

// ReferenceStats is one (source collection, referenced collection) pair.
type ReferenceStats struct {
	Source     string
	Referenced string
	// LastReferencedEtag / LastReferencedTombstoneEtag are the watermarks of
	// the reference pass over the referenced collection.
	LastReferencedEtag          int64
	LastReferencedTombstoneEtag int64
	// Remapped counts the source documents re-mapped because a referenced
	// document changed or was deleted, since the index file was created
	// (persisted).
	Remapped int64
}

// IndexingError is one document's failure (IndexErrors on the wire).
type IndexingError struct {
	Timestamp time.Time
	Document  string // document id ("" for a reduce error: then the group key)
	Action    string // "Map", "Reduce", "Load"
	Error     string
}
