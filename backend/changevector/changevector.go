// Package changevector implements RavenDB's change-vector text format and its
// merge and compare rules. Clients compare change vectors as strings, so the
// text this package writes must be byte-identical to RavenDB's: entries
// "TAG:ETAG-DBID" joined by ", ", sorted by database id (ordinal) after a merge.
package changevector

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Entry is one node's position: the etag a database copy (DBID) reached.
type Entry struct {
	Tag  string // node tag, e.g. "A"
	Etag int64
	DBID string // 22-char base64 database id
}

// Vector is a parsed change vector. The zero value is the empty vector.
type Vector []Entry

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("invalid change vector")

// Defaults of the limits on vectors that come from outside. A vector has
// one entry per database copy that ever wrote to the database (restores and
// re-created copies add new ones): a handful in practice, tens in a long-lived
// cluster. An entry is at most about 50 bytes ("ABCD:" + 19 digits + "-" +
// a 22-character id + ", "), so 1,024 entries fit in 64 KiB.
const (
	DefaultMaxLength  = 64 << 10
	DefaultMaxEntries = 1024
)

var maxLength, maxEntries atomic.Int64

// SetLimits sets the limits of every later Parse (the server sets them once
// at start from its flags); 0 takes the default.
func SetLimits(length, entries int) error {
	if length < 0 || entries < 0 {
		return fmt.Errorf("change vector limits must not be negative (%d, %d)", length, entries)
	}
	maxLength.Store(int64(length))
	maxEntries.Store(int64(entries))
	return nil
}

// MaxLength is the longest change-vector text Parse accepts.
func MaxLength() int {
	if n := maxLength.Load(); n > 0 {
		return int(n)
	}
	return DefaultMaxLength
}

// MaxEntries is the most entries Parse accepts.
func MaxEntries() int {
	if n := maxEntries.Load(); n > 0 {
		return int(n)
	}
	return DefaultMaxEntries
}

// CheckLength refuses a change vector longer than MaxLength, for a vector
// that is compared as text rather than parsed (a write's expectation).
func CheckLength(s string) error {
	if n := MaxLength(); len(s) > n {
		return fmt.Errorf("%w: %d bytes long at position %d, more than the %d bytes a change vector may have (the limit is set by --max-change-vector-length)", ErrSyntax, len(s), n, n)
	}
	return nil
}

// Parse reads a change vector that comes from outside (a client, a
// replication peer), within MaxLength and MaxEntries. It tolerates any run of
// whitespace and commas between entries. A sharded "version | order" vector
// is parsed by its version part only.
func Parse(s string) (Vector, error) {
	if err := CheckLength(s); err != nil {
		return nil, err
	}
	return parse(s, MaxEntries())
}

// ParseStored reads a vector this node stored or computed itself, without
// limits: a database whose vector grew past them still opens and serves.
func ParseStored(s string) (Vector, error) { return parse(s, -1) }

func parse(s string, limit int) (Vector, error) {
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i]
	}
	var v Vector
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			return v, nil
		}
		start := i
		if limit >= 0 && len(v) == limit {
			return nil, fmt.Errorf("%w: more than %d entries, the next at position %d (the limit is set by --max-change-vector-entries)", ErrSyntax, limit, start)
		}
		for i < len(s) && s[i] != ',' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			i++
		}
		e, err := parseEntry(s[start:i])
		if err != nil {
			return nil, err
		}
		v = append(v, e)
	}
}

func parseEntry(s string) (Entry, error) {
	colon := strings.IndexByte(s, ':')
	if colon <= 0 {
		return Entry{}, fmt.Errorf("%w: entry %q has no node tag", ErrSyntax, s)
	}
	tag := s[:colon]
	for i := 0; i < len(tag); i++ {
		if tag[i] < 'A' || tag[i] > 'Z' {
			return Entry{}, fmt.Errorf("%w: entry %q has a bad node tag", ErrSyntax, s)
		}
	}
	rest := s[colon+1:]
	dash := strings.IndexByte(rest, '-')
	if dash <= 0 {
		return Entry{}, fmt.Errorf("%w: entry %q has no etag", ErrSyntax, s)
	}
	etag, err := strconv.ParseInt(rest[:dash], 10, 64)
	if err != nil || etag < 0 || rest[0] == '+' {
		return Entry{}, fmt.Errorf("%w: entry %q has a bad etag", ErrSyntax, s)
	}
	dbid := rest[dash+1:]
	if dbid == "" {
		return Entry{}, fmt.Errorf("%w: entry %q has no database id", ErrSyntax, s)
	}
	for i := 0; i < len(dbid); i++ {
		c := dbid[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-') {
			return Entry{}, fmt.Errorf("%w: entry %q has a bad database id", ErrSyntax, s)
		}
	}
	return Entry{Tag: tag, Etag: etag, DBID: dbid}, nil
}

// String writes the vector in RavenDB's text format, entries in their
// current order.
func (v Vector) String() string {
	if len(v) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(len(v) * 36)
	v.writeText(&b)
	return b.String()
}

// writeText writes the entries in RavenDB's text format.
func (v Vector) writeText(b *strings.Builder) {
	for i, e := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Tag)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(e.Etag, 10))
		b.WriteByte('-')
		b.WriteString(e.DBID)
	}
}

// Get returns the etag recorded for dbid, 0 when absent.
func (v Vector) Get(dbid string) int64 {
	for _, e := range v {
		if e.DBID == dbid {
			return e.Etag
		}
	}
	return 0
}

// sorted returns a copy sorted by DBID (ordinal), with one entry per DBID
// (the larger etag wins).
func (v Vector) normalized() Vector {
	out := make(Vector, 0, len(v))
	for _, e := range v {
		found := false
		for i := range out {
			if out[i].DBID == e.DBID {
				found = true
				if e.Etag > out[i].Etag {
					out[i] = e
				}
				break
			}
		}
		if !found {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DBID < out[j].DBID })
	return out
}

// Merge keeps, for every database id, the larger etag. The result is sorted
// by database id, as RavenDB writes merged vectors.
func Merge(vs ...Vector) Vector {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	all := make(Vector, 0, n)
	for _, v := range vs {
		all = append(all, v...)
	}
	return all.normalized()
}

// WithEntry returns v with the entry for (tag, dbid) set to etag, sorted by
// database id. It is how a local write derives a document's vector from the
// database vector.
func (v Vector) WithEntry(tag string, etag int64, dbid string) Vector {
	out := make(Vector, 0, len(v)+1)
	set := false
	for _, e := range v {
		if e.DBID == dbid {
			out = append(out, Entry{Tag: tag, Etag: etag, DBID: dbid})
			set = true
			continue
		}
		out = append(out, e)
	}
	if !set {
		out = append(out, Entry{Tag: tag, Etag: etag, DBID: dbid})
	}
	return out.normalized()
}

// EtagTemplate splits v.WithEntry(tag, e, dbid).String() around the etag:
// for every e, that text is before + strconv.FormatInt(e, 10) + after (the
// entries are ordered by database id, never by etag). It lets a run of
// writes format their vectors without building a vector each.
func (v Vector) EtagTemplate(tag, dbid string) (before, after string) {
	w := v.WithEntry(tag, 0, dbid)
	k := slices.IndexFunc(w, func(e Entry) bool { return e.DBID == dbid })
	var b strings.Builder
	w[:k].writeText(&b)
	if k > 0 {
		b.WriteString(", ")
	}
	b.WriteString(w[k].Tag)
	b.WriteByte(':')
	before = b.String()
	b.Reset()
	b.WriteByte('-')
	b.WriteString(dbid)
	if k+1 < len(w) {
		b.WriteString(", ")
		w[k+1:].writeText(&b)
	}
	return before, b.String()
}

// Status is the result of comparing an incoming vector with a local one.
type Status int

const (
	// AlreadyMerged: the local side has seen everything the remote has.
	AlreadyMerged Status = iota
	// Update: the remote is strictly newer.
	Update
	// Conflict: each side has seen something the other has not.
	Conflict
)

func (s Status) String() string {
	switch s {
	case AlreadyMerged:
		return "AlreadyMerged"
	case Update:
		return "Update"
	case Conflict:
		return "Conflict"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Compare tells how remote relates to local, by RavenDB's rules: equal text
// or an empty remote is AlreadyMerged, an empty local is Update, otherwise
// entries are matched by database id with missing entries counting as 0.
func Compare(remote, local Vector) Status {
	if len(remote) == 0 {
		return AlreadyMerged
	}
	if len(local) == 0 {
		return Update
	}
	remoteAhead, localAhead := false, false
	for _, r := range remote {
		if r.Etag > local.Get(r.DBID) {
			remoteAhead = true
			break
		}
	}
	for _, l := range local {
		if l.Etag > remote.Get(l.DBID) {
			localAhead = true
			break
		}
	}
	switch {
	case remoteAhead && localAhead:
		return Conflict
	case remoteAhead:
		return Update
	default:
		return AlreadyMerged
	}
}

// CompareStrings is Compare on the text forms; equal strings are
// AlreadyMerged without parsing.
func CompareStrings(remote, local string) (Status, error) {
	if remote == local || remote == "" {
		return AlreadyMerged, nil
	}
	r, err := Parse(remote)
	if err != nil {
		return 0, err
	}
	l, err := Parse(local)
	if err != nil {
		return 0, err
	}
	return Compare(r, l), nil
}
