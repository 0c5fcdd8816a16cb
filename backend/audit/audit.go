// Package audit keeps a node's audit log: who (the certificate), did what
// administrative action, when, and how it ended. Each node records the
// actions it was asked to do, in a JSON-lines file under its data directory,
// written and synced before the action's response is sent; the newest
// entries are also kept in memory for the studio and the endpoint.
package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Entry is one audited action.
type Entry struct {
	Time time.Time
	Node string
	// Who is the caller: the certificate's name and thumbprint, and its
	// clearance ("unsecured" when the server runs without authentication).
	Who        string
	Thumbprint string `json:",omitempty"`
	Clearance  string
	Remote     string `json:",omitempty"`
	// Action names what was done (database.delete, certificate.put...).
	Action   string
	Database string `json:",omitempty"`
	// Target is what the action was about, beyond the database (a
	// thumbprint, a node tag, a subscription, an identity prefix).
	Target string `json:",omitempty"`
	Method string
	Path   string
	Status int
}

// Succeeded tells whether the action went through.
func (e Entry) Succeeded() bool { return e.Status >= 200 && e.Status < 400 }

// Log is a node's audit log.
type Log struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	size    int64
	maxSize int64
	recent  []Entry // oldest first, at most keep
	keep    int
}

// Options tune Open.
type Options struct {
	// MaxSize is the size at which the file is rotated to <file>.1 (the
	// previous .1 is dropped); 64 MiB when zero.
	MaxSize int64
	// Keep is how many recent entries are held in memory; 10,000 when zero.
	Keep int
}

// Open opens (creating) the log at path and loads its newest entries.
func Open(path string, opts Options) (*Log, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = 64 << 20
	}
	if opts.Keep <= 0 {
		opts.Keep = 10_000
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	l := &Log{path: path, maxSize: opts.MaxSize, keep: opts.Keep}
	for _, p := range []string{path + ".1", path} {
		if err := l.load(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l.f, l.size = f, st.Size()
	return l, nil
}

func (l *Log) load(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			l.remember(e)
		}
	}
	return nil // a torn last line (a crash mid-write) is skipped
}

func (l *Log) remember(e Entry) {
	l.recent = append(l.recent, e)
	if len(l.recent) > l.keep*2 {
		l.recent = append([]Entry(nil), l.recent[len(l.recent)-l.keep:]...)
	}
}

// Append writes an entry and syncs the file.
func (l *Log) Append(e Entry) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("the audit log is closed")
	}
	if l.size+int64(len(b)) > l.maxSize {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if _, err := l.f.Write(b); err != nil {
		return err
	}
	l.size += int64(len(b))
	if err := l.f.Sync(); err != nil {
		return err
	}
	l.remember(e)
	return nil
}

func (l *Log) rotate() error {
	l.f.Close()
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		l.f = nil
		return err
	}
	l.f, l.size = f, 0
	return nil
}

// Filter selects entries; empty fields match everything.
type Filter struct {
	Action   string // a prefix: "database" matches database.create and database.delete
	Who      string // a substring of the name or the thumbprint, case-insensitive
	Database string // case-insensitive
}

func (f Filter) match(e Entry) bool {
	if f.Action != "" && !strings.HasPrefix(e.Action, f.Action) {
		return false
	}
	if f.Database != "" && !strings.EqualFold(f.Database, e.Database) {
		return false
	}
	if f.Who != "" {
		w := strings.ToLower(f.Who)
		if !strings.Contains(strings.ToLower(e.Who), w) && !strings.Contains(strings.ToLower(e.Thumbprint), w) {
			return false
		}
	}
	return true
}

// List returns matching entries, newest first, skipping start and
// returning at most pageSize, and how many match in all.
func (l *Log) List(f Filter, start, pageSize int) ([]Entry, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	total := 0
	for i := len(l.recent) - 1; i >= 0 && total < l.keep; i-- {
		if !f.match(l.recent[i]) {
			continue
		}
		if total >= start && len(out) < pageSize {
			out = append(out, l.recent[i])
		}
		total++
	}
	return out, total
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
