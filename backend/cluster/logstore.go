package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// LogStoreError says that raft.db cannot be used, and what to do about it,
// in one line. bbolt trusts its file: on garbage it panics (a freelist or
// page of the wrong type) or faults (a file shorter than its pages), so the
// file is checked before raft-boltdb opens it.
type LogStoreError struct {
	Path string
	Why  string
}

func (e *LogStoreError) Error() string {
	return fmt.Sprintf("%s is not a valid Raft log store: %s; move it away (mv %s %s.broken) and restart: "+
		"a single node then starts a new cluster state and keeps its databases, a member of a larger cluster "+
		"restarts with --join <URL of a healthy member> to receive the state again; or restore the file from a backup",
		e.Path, e.Why, e.Path, e.Path)
}

// errStoreInUse is a log store another process holds: a node running on
// the same data directory.
type errStoreInUse struct{ path string }

func (e errStoreInUse) Error() string {
	return e.path + " is in use by another process (a node running on this data directory?): stop the node first"
}

// openLogStore checks path and opens it with raft-boltdb; a store another
// process holds is an error after a second, not a wait for ever.
func openLogStore(path string) (store *raftboltdb.BoltStore, err error) {
	if err := checkLogStore(path); err != nil {
		return nil, err
	}
	err = guard(path, func() error {
		var oerr error
		store, oerr = raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: time.Second}})
		return oerr
	})
	return store, err
}

// guard runs fn, turning a panic or a memory fault in it (bbolt reading a
// damaged file through its mmap) into a LogStoreError, and a lock another
// process holds (bbolt's timeout) into errStoreInUse.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &LogStoreError{Path: path, Why: fmt.Sprintf("reading it failed: %v", r)}
		}
	}()
	if err := fn(); err != nil {
		var lse *LogStoreError
		if errors.As(err, &lse) {
			return err
		}
		if errors.Is(err, bolt.ErrTimeout) {
			return errStoreInUse{path}
		}
		return &LogStoreError{Path: path, Why: err.Error()}
	}
	return nil
}

// bbolt's on-disk constants (go.etcd.io/bbolt, file format version 2).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltMetaFlag     = 0x04
	boltFreelistFlag = 0x10
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta decodes and validates the meta page at off (its checksum is
// FNV-64a of the meta fields before it).
func readMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltPageHeader+64 {
		return boltMeta{}, false
	}
	le := binary.LittleEndian
	if le.Uint16(b[8:10])&boltMetaFlag == 0 {
		return boltMeta{}, false
	}
	m := b[boltPageHeader:]
	if le.Uint32(m[0:4]) != boltMagic || le.Uint32(m[4:8]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:64]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:12]), root: le.Uint64(m[16:24]), freelist: le.Uint64(m[32:40]), pgid: le.Uint64(m[40:48]), txid: le.Uint64(m[48:56])}, true
}

// checkLogStore reads raft.db's meta pages and then every key, with faults
// and panics turned into errors. A missing or empty file is fine (bbolt
// initialises it).
func checkLogStore(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &LogStoreError{Path: path, Why: err.Error()}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return &LogStoreError{Path: path, Why: err.Error()}
	}
	size := fi.Size()
	if size == 0 {
		f.Close()
		return nil
	}
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	m0, ok0 := readMeta(head)
	var m1 boltMeta
	ok1 := false
	if ok0 && m0.pageSize >= 512 && m0.pageSize <= 1<<16 {
		second := make([]byte, 4096)
		if n, _ := f.ReadAt(second, int64(m0.pageSize)); n > 0 {
			m1, ok1 = readMeta(second[:n])
		}
	} else {
		// The first meta page is bad: find the second at the usual sizes.
		for _, ps := range []int64{4096, 8192, 16384, 65536} {
			second := make([]byte, 4096)
			if n, _ := f.ReadAt(second, ps); n > 0 {
				if m1, ok1 = readMeta(second[:n]); ok1 && int64(m1.pageSize) == ps {
					break
				}
				ok1 = false
			}
		}
	}
	f.Close()
	if !ok0 && !ok1 {
		return &LogStoreError{Path: path, Why: fmt.Sprintf("neither of its meta pages is a valid bbolt meta page (%d bytes, first bytes %q)", size, head[:min(len(head), 16)])}
	}
	m := m0
	if !ok0 || (ok1 && m1.txid > m0.txid) {
		m = m1
	}
	ps := int64(m.pageSize)
	if ps < 512 || ps > 1<<16 {
		return &LogStoreError{Path: path, Why: fmt.Sprintf("its page size %d is not valid", ps)}
	}
	if int64(m.pgid)*ps > size {
		return &LogStoreError{Path: path, Why: fmt.Sprintf("it was truncated: it has %d pages of %d bytes (%d bytes) but the file has %d bytes", m.pgid, ps, int64(m.pgid)*ps, size)}
	}
	if m.freelist < 2 || m.freelist >= m.pgid || m.root < 2 || m.root >= m.pgid {
		return &LogStoreError{Path: path, Why: fmt.Sprintf("its meta page points outside the file (freelist page %d, root page %d, %d pages)", m.freelist, m.root, m.pgid)}
	}
	f, err = os.Open(path)
	if err != nil {
		return &LogStoreError{Path: path, Why: err.Error()}
	}
	w := &boltWalker{f: f, ps: ps, pages: m.pgid, seen: map[uint64]bool{}}
	err = w.freelist(m.freelist)
	if err == nil {
		err = w.tree(m.root, 0)
	}
	f.Close()
	if err != nil {
		return &LogStoreError{Path: path, Why: err.Error()}
	}
	// Every page that holds data: read every key of every bucket. The
	// read transaction is ended by hand: after a panic inside bbolt.View
	// its read lock would stay held and Close would wait for it forever.
	return guard(path, func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
		if err != nil {
			return err
		}
		tx, err := db.Begin(false)
		if err != nil {
			db.Close()
			return err
		}
		defer func() {
			defer func() { _ = recover() }() // a broken file may break the clean-up too
			_ = tx.Rollback()
			_ = db.Close()
		}()
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { return nil })
		})
	})
}

// boltWalker checks the structure bbolt trusts blindly, reading pages with
// ReadAt (no mmap, so no fault): every page of the tree is a branch or leaf
// page inside the file, every element and key inside its page, no page
// reached twice (a cycle would send bbolt's cursor round forever), and the
// freelist inside its pages. bbolt then reads only sound pages.
type boltWalker struct {
	f     *os.File
	ps    int64
	pages uint64
	seen  map[uint64]bool
}

const (
	boltBranchFlag = 0x01
	boltLeafFlag   = 0x02
	boltBucketLeaf = 0x01
	boltMaxDepth   = 64
)

// page reads page id with its overflow pages.
func (w *boltWalker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, fmt.Errorf("page %d is outside the file's %d pages", id, w.pages)
	}
	head := make([]byte, boltPageHeader)
	if _, err := w.f.ReadAt(head, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("page %d cannot be read: %v", id, err)
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:16]))
	if overflow >= w.pages-id {
		return nil, fmt.Errorf("page %d claims %d overflow pages beyond the file", id, overflow)
	}
	for i := id; i <= id+overflow; i++ {
		if w.seen[i] {
			return nil, fmt.Errorf("page %d is reached twice (a cycle or shared page)", i)
		}
		w.seen[i] = true
	}
	b := make([]byte, int64(overflow+1)*w.ps)
	if _, err := w.f.ReadAt(b, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("page %d cannot be read: %v", id, err)
	}
	return b, nil
}

func (w *boltWalker) freelist(id uint64) error {
	b, err := w.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %v", err)
	}
	if binary.LittleEndian.Uint16(b[8:10])&boltFreelistFlag == 0 {
		return fmt.Errorf("its freelist page %d is not a freelist page (garbage in the file)", id)
	}
	count, start := uint64(binary.LittleEndian.Uint16(b[10:12])), uint64(boltPageHeader)
	if count == 0xFFFF {
		count, start = binary.LittleEndian.Uint64(b[16:24]), boltPageHeader+8
	}
	if count > (uint64(len(b))-start)/8 {
		return fmt.Errorf("its freelist page %d lists %d pages, more than it can hold", id, count)
	}
	for i := uint64(0); i < count; i++ {
		if p := binary.LittleEndian.Uint64(b[start+i*8:]); p < 2 || p >= w.pages {
			return fmt.Errorf("its freelist names page %d, outside the file's %d pages", p, w.pages)
		}
	}
	return nil
}

// tree checks the b-tree rooted at page id.
func (w *boltWalker) tree(id uint64, depth int) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("its b-tree is deeper than %d pages at page %d", boltMaxDepth, id)
	}
	b, err := w.page(id)
	if err != nil {
		return err
	}
	return w.node(b, id, depth)
}

// node checks one branch or leaf page held in b (a page, or an inline
// bucket's page).
func (w *boltWalker) node(b []byte, id uint64, depth int) error {
	if len(b) < boltPageHeader {
		return fmt.Errorf("page %d is cut short", id)
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(b[8:10]), int(le.Uint16(b[10:12]))
	if boltPageHeader+count*16 > len(b) {
		return fmt.Errorf("page %d has %d elements, more than it can hold", id, count)
	}
	switch {
	case flags&boltBranchFlag != 0:
		for i := 0; i < count; i++ {
			e := boltPageHeader + i*16
			pos, ksize, child := int(le.Uint32(b[e:])), int(le.Uint32(b[e+4:])), le.Uint64(b[e+8:])
			if pos < 0 || ksize < 0 || e+pos+ksize > len(b) {
				return fmt.Errorf("page %d: element %d's key lies outside the page", id, i)
			}
			if err := w.tree(child, depth+1); err != nil {
				return err
			}
		}
	case flags&boltLeafFlag != 0:
		for i := 0; i < count; i++ {
			e := boltPageHeader + i*16
			eflags, pos, ksize, vsize := le.Uint32(b[e:]), int(le.Uint32(b[e+4:])), int(le.Uint32(b[e+8:])), int(le.Uint32(b[e+12:]))
			if pos < 0 || ksize < 0 || vsize < 0 || e+pos+ksize+vsize > len(b) {
				return fmt.Errorf("page %d: element %d lies outside the page", id, i)
			}
			if eflags&boltBucketLeaf == 0 {
				continue
			}
			v := b[e+pos+ksize : e+pos+ksize+vsize]
			if len(v) < 16 {
				return fmt.Errorf("page %d: bucket %d's header is cut short", id, i)
			}
			if depth > boltMaxDepth {
				return fmt.Errorf("its buckets nest deeper than %d at page %d", boltMaxDepth, id)
			}
			if root := le.Uint64(v[0:8]); root != 0 {
				if err := w.tree(root, depth+1); err != nil {
					return err
				}
			} else if err := w.node(v[16:], id, depth+1); err != nil { // an inline bucket
				return err
			}
		}
	default:
		return fmt.Errorf("page %d is neither a branch nor a leaf page (garbage in the file)", id)
	}
	return nil
}
