// Package smuggler exports a database to RavenDB's `.ravendbdump` stream and
// imports such a stream (from RavenDB 4.2 to 7.x, or from Rookery) into a
// database, as RavenDB's smuggler does. The stream itself is package dump;
// this package decides what goes in and what comes out: documents with
// their metadata and change vectors (HiLo documents among them), conflicts,
// index definitions, identities and subscriptions, with the options of
// RavenDB's DatabaseSmugglerOptions (item types, collections, expired
// documents, a transform script), and counts everything in a Result shaped
// as RavenDB's SmugglerResult.
package smuggler

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
)

// Item types (RavenDB's DatabaseItemType names).
const (
	TypeDocuments         = "Documents"
	TypeRevisionDocuments = "RevisionDocuments"
	TypeIndexes           = "Indexes"
	TypeIdentities        = "Identities"
	TypeTombstones        = "Tombstones"
	TypeConflicts         = "Conflicts"
	TypeCompareExchange   = "CompareExchange"
	TypeDatabaseRecord    = "DatabaseRecord"
	TypeAttachments       = "Attachments"
	TypeCounterGroups     = "CounterGroups"
	TypeSubscriptions     = "Subscriptions"
	TypeTimeSeries        = "TimeSeries"
)

// knownTypes are the names OperateOnTypes may hold (RavenDB's, including
// those Rookery reads but has nothing of yet).
var knownTypes = map[string]bool{
	"None": true, TypeDocuments: true, TypeRevisionDocuments: true, TypeIndexes: true, TypeIdentities: true,
	TypeTombstones: true, "LegacyAttachments": true, TypeConflicts: true, TypeCompareExchange: true,
	"LegacyDocumentDeletions": true, "LegacyAttachmentDeletions": true, TypeDatabaseRecord: true, "Unknown": true,
	"Counters": true, TypeAttachments: true, TypeCounterGroups: true, TypeSubscriptions: true,
	"CompareExchangeTombstones": true, TypeTimeSeries: true, "ReplicationHubCertificates": true,
}

// DefaultTypes is what an export or import covers when the options name
// no types (RavenDB's client default).
var DefaultTypes = []string{TypeIndexes, TypeDocuments, TypeRevisionDocuments, TypeConflicts, TypeDatabaseRecord,
	"ReplicationHubCertificates", TypeIdentities, TypeCompareExchange, TypeAttachments, TypeCounterGroups,
	TypeSubscriptions, TypeTimeSeries}

// DefaultMaxSteps is MaxStepsForTransformScript's default.
const DefaultMaxSteps = 10000

// stepTime is how long one step of MaxStepsForTransformScript may take:
// goja counts no steps, so the budget is time (10,000 steps = 100 ms per
// document).
const stepTime = 10 * time.Microsecond

// Options are RavenDB's DatabaseSmugglerOptions, as the clients and the
// studio send them.
type Options struct {
	OperateOnTypes             string
	IncludeExpired             *bool
	IncludeArtificial          bool
	TransformScript            string
	MaxStepsForTransformScript int
	Collections                []string
	CompressionAlgorithm       string // Gzip (default) or Zstd, for exports
	FileName                   string
	EncryptionKey              string
	SkipRevisionCreation       bool

	types map[string]bool
}

// ParseOptions reads options JSON (an empty body gives the defaults) and
// checks them: unknown item types, an encryption key (not supported) and a
// compression other than Gzip or Zstd are 400s.
func ParseOptions(raw []byte) (Options, error) {
	var o Options
	if len(strings.TrimSpace(string(raw))) > 0 {
		// OperateOnTypes arrives as a comma string (clients, studio) or an
		// array; Collections may be null.
		var in struct {
			Options
			OperateOnTypes json.RawMessage
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return o, dberr.New(dberr.BadRequest, "the smuggler options are not valid JSON: %v", err)
		}
		o = in.Options
		if len(in.OperateOnTypes) > 0 && string(in.OperateOnTypes) != "null" {
			var s string
			if err := json.Unmarshal(in.OperateOnTypes, &s); err != nil {
				var list []string
				if err := json.Unmarshal(in.OperateOnTypes, &list); err != nil {
					return o, dberr.New(dberr.BadRequest, "OperateOnTypes must be a comma-separated string or an array of names")
				}
				s = strings.Join(list, ",")
			}
			o.OperateOnTypes = s
		}
	}
	return o, o.check()
}

// Check checks the options (ParseOptions does; options built in code
// call it).
func (o *Options) Check() error { return o.check() }

// CheckScript compiles the transform script, if any: a script that does not
// compile is a 400 before anything runs.
func (o *Options) CheckScript() error {
	if strings.TrimSpace(o.TransformScript) == "" {
		return nil
	}
	_, err := patch.Compile(o.TransformScript, "")
	return err
}

func (o *Options) check() error {
	o.types = map[string]bool{}
	names := DefaultTypes
	if strings.TrimSpace(o.OperateOnTypes) != "" {
		names = nil
		for _, t := range strings.Split(o.OperateOnTypes, ",") {
			if t = strings.TrimSpace(t); t != "" {
				names = append(names, t)
			}
		}
	}
	for _, t := range names {
		if !knownTypes[t] {
			return dberr.New(dberr.BadRequest, "unknown item type %q in OperateOnTypes", t)
		}
		o.types[t] = true
	}
	if o.EncryptionKey != "" {
		return dberr.New(dberr.BadRequest, "encrypted dumps are not supported by Rookery: export without EncryptionKey")
	}
	switch strings.ToLower(o.CompressionAlgorithm) {
	case "", "gzip", "zstd":
	default:
		return dberr.New(dberr.BadRequest, "CompressionAlgorithm %q: Gzip or Zstd", o.CompressionAlgorithm)
	}
	if o.MaxStepsForTransformScript <= 0 {
		o.MaxStepsForTransformScript = DefaultMaxSteps
	}
	if len(o.Collections) > 10000 {
		return dberr.New(dberr.BadRequest, "%d collections named: at most 10000", len(o.Collections))
	}
	return nil
}

// Has tells whether the options cover an item type.
func (o *Options) Has(t string) bool {
	if o.types == nil {
		_ = o.check()
	}
	return o.types[t]
}

func (o *Options) includeExpired() bool { return o.IncludeExpired == nil || *o.IncludeExpired }

// compression is the export's compression.
func (o *Options) compression() dump.Compression {
	if strings.EqualFold(o.CompressionAlgorithm, "zstd") {
		return dump.Zstd
	}
	return dump.Gzip
}

// wantsCollection tells whether a document of collection c goes in.
func (o *Options) wantsCollection(c string) bool {
	if len(o.Collections) == 0 {
		return true
	}
	for _, x := range o.Collections {
		if strings.EqualFold(x, c) {
			return true
		}
	}
	return false
}

// Counts are one item type's counters (RavenDB's Counts).
type Counts struct {
	StartTime    *time.Time `json:"StartTime"`
	Processed    bool       `json:"Processed"`
	ReadCount    int64      `json:"ReadCount"`
	Skipped      bool       `json:"Skipped"`
	ErroredCount int64      `json:"ErroredCount"`
	LastEtag     int64      `json:"LastEtag"`
}

// DocumentCounts adds attachments and skipped documents.
type DocumentCounts struct {
	Counts
	Attachments  Counts `json:"Attachments"`
	SkippedCount int64  `json:"SkippedCount"`
}

// Result is RavenDB's SmugglerResult: counters per item type, messages,
// elapsed time. It is safe for one writer and many readers (Snapshot).
type Result struct {
	mu      sync.Mutex
	started time.Time
	done    time.Duration

	DatabaseRecord    Counts
	Documents         DocumentCounts
	RevisionDocuments DocumentCounts
	Tombstones        Counts
	Conflicts         Counts
	Identities        Counts
	Indexes           Counts
	CompareExchange   Counts
	Subscriptions     Counts
	Counters          DocumentCounts
	TimeSeries        DocumentCounts
	Messages          []string

	// pos is how far the job went through its input (Position); posDone
	// is its Done, counted by Track's reader without the lock.
	pos     Position
	posDone atomic.Int64
}

// Position is how far a job went through its input, for progress bars: an
// import's dump bytes read of the dump's size, an export's etags scanned
// of the database's last etag when it started. Total 0 is unknown (a
// request without Content-Length).
type Position struct {
	Done  int64  `json:"Done"`
	Total int64  `json:"Total"`
	Unit  string `json:"Unit"` // "bytes" or "etags"
}

// Track counts the bytes read through rd as the result's position, of
// total (0 when unknown): the dump an import reads, or the request body
// that carries it.
func (r *Result) Track(rd io.Reader, total int64) io.Reader {
	r.add(func() { r.pos = Position{Total: max(total, 0), Unit: "bytes"} })
	return &countingReader{r: rd, n: &r.posDone}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Position is the job's position (Unit "" when it does not track one).
func (r *Result) Position() Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.positionLocked()
}

func (r *Result) positionLocked() Position {
	p := r.pos
	p.Done = r.posDone.Load()
	if p.Total > 0 && p.Done > p.Total {
		p.Done = p.Total
	}
	return p
}

// NewResult starts a result's clock.
func NewResult(now time.Time) *Result { return &Result{started: now} }

// maxMessages bounds the messages a result keeps (the first ones and a
// count of the rest).
const maxMessages = 500

func (r *Result) add(fn func()) {
	r.mu.Lock()
	fn()
	r.mu.Unlock()
}

// message records a message, as RavenDB's "[HH:mm:ss LEVEL] text".
func (r *Result) message(level, format string, args ...any) {
	r.add(func() {
		if len(r.Messages) >= maxMessages {
			if len(r.Messages) == maxMessages {
				r.Messages = append(r.Messages, "[…] further messages left out")
			}
			return
		}
		r.Messages = append(r.Messages, fmt.Sprintf("[%s %s] %s", time.Now().UTC().Format("15:04:05"), level, fmt.Sprintf(format, args...)))
	})
}

// finish stops the clock.
func (r *Result) finish(now time.Time) { r.add(func() { r.done = now.Sub(r.started) }) }

// Snapshot is the result as JSON for /operations/state and the import's
// answer: RavenDB's shape, Elapsed as a TimeSpan.
func (r *Result) Snapshot() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	el := r.done
	if el == 0 && !r.started.IsZero() {
		el = time.Since(r.started)
	}
	msgs := append([]string{}, r.Messages...)
	if msgs == nil {
		msgs = []string{}
	}
	out := map[string]any{
		"DatabaseRecord": r.DatabaseRecord, "Documents": r.Documents, "RevisionDocuments": r.RevisionDocuments,
		"Tombstones": r.Tombstones, "Conflicts": r.Conflicts, "Identities": r.Identities, "Indexes": r.Indexes,
		"CompareExchange": r.CompareExchange, "Subscriptions": r.Subscriptions, "Counters": r.Counters,
		"TimeSeries": r.TimeSeries, "CompareExchangeTombstones": Counts{}, "ReplicationHubCertificates": Counts{},
		"TimeSeriesDeletedRanges": Counts{}, "Messages": msgs, "Elapsed": timeSpan(el),
	}
	if r.pos.Unit != "" {
		// Not RavenDB's: the studio's progress bar (clients ignore it).
		out["Position"] = r.positionLocked()
	}
	return out
}

// Progress is a short line for progress bars: items read so far.
func (r *Result) Progress() (docs, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	docs = r.Documents.ReadCount
	total = docs + r.Conflicts.ReadCount + r.Indexes.ReadCount + r.Identities.ReadCount + r.Subscriptions.ReadCount + r.Documents.Attachments.ReadCount
	return docs, total
}

func timeSpan(d time.Duration) string {
	h := int64(d / time.Hour)
	m := int64(d/time.Minute) % 60
	s := int64(d/time.Second) % 60
	ticks := int64(d%time.Second) / 100
	return fmt.Sprintf("%02d:%02d:%02d.%07d", h, m, s, ticks)
}

func start(c *Counts) {
	now := time.Now().UTC()
	c.StartTime, c.Processed = &now, true
}
