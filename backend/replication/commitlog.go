package replication

import (
	"sort"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// CommitLog remembers when a database's recent etags were committed, so a
// sender can tell the age of the oldest change its destination has not
// acknowledged. It is fed by the database's commit hook and kept in memory
// only: a ring of marks (the highest etag committed by a moment), at most
// one per markEvery, so it spans at least logMarks × markEvery of commits
// (more when writes are sparse). Older positions fall back to the rows'
// last-modified times.
type CommitLog struct {
	mu    sync.Mutex
	marks []commitMark // ring, oldest at start once full
	start int
	// floor: etags at or below it are not covered (written before the log
	// began, or their marks were overwritten).
	floor int64
	now   func() time.Time
}

type commitMark struct {
	etag int64     // the highest etag committed at at
	at   time.Time // when the first commit folded into this mark finished
}

const (
	logMarks  = 8192
	markEvery = 10 * time.Millisecond
)

// NewCommitLog starts a log for a database whose last committed etag is
// lastEtag; earlier etags are not covered.
func NewCommitLog(lastEtag int64) *CommitLog {
	return &CommitLog{floor: lastEtag, now: time.Now}
}

// Record notes a committed transaction's changes (a storage commit hook).
func (l *CommitLog) Record(changes []storage.Change) {
	var top int64
	for _, c := range changes {
		top = max(top, c.Etag)
	}
	if top == 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.marks)
	if n > 0 {
		last := &l.marks[(l.start+n-1)%n]
		if top <= last.etag {
			return
		}
		// Commits close together share a mark stamped with the first of
		// them: an age read from it is at most markEvery too old.
		if now.Sub(last.at) < markEvery {
			last.etag = top
			return
		}
	}
	m := commitMark{etag: top, at: now}
	if n < logMarks {
		l.marks = append(l.marks, m)
		return
	}
	l.floor = l.marks[l.start].etag
	l.marks[l.start] = m
	l.start = (l.start + 1) % n
}

// OldestAfter returns when the first etag above etag was committed, and
// false when the log cannot tell (that etag is older than what the log
// covers, or no commit the log saw is above it).
func (l *CommitLog) OldestAfter(etag int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if etag < l.floor {
		return time.Time{}, false
	}
	n := len(l.marks)
	at := func(i int) commitMark { return l.marks[(l.start+i)%n] }
	i := sort.Search(n, func(i int) bool { return at(i).etag > etag })
	if i == n {
		return time.Time{}, false
	}
	return at(i).at, true
}
