package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// validLogStore writes a small raft.db with raft-boltdb itself; pageSize 0
// is the OS page size (small pages keep fuzz inputs small).
func validLogStore(t testing.TB, pageSize, entries int) []byte {
	path := filepath.Join(t.TempDir(), "raft.db")
	st, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{PageSize: pageSize}})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := 1; i <= entries; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte(strings.Repeat("x", i*7))})
	}
	if err := st.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := st.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkBytes(t testing.TB, b []byte) error {
	path := filepath.Join(t.TempDir(), "raft.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return checkLogStore(path)
}

func TestCheckLogStore(t *testing.T) {
	good := validLogStore(t, 0, 50)
	if err := checkBytes(t, good); err != nil {
		t.Fatalf("a valid raft.db: %v", err)
	}
	if err := checkBytes(t, nil); err != nil {
		t.Fatalf("an empty raft.db (bbolt initialises it): %v", err)
	}
	bad := map[string][]byte{
		"text":      []byte(strings.Repeat("not bolt ", 1000)),
		"truncated": good[:len(good)/2],
		"short":     good[:100],
		"zeroed":    append(append([]byte(nil), good[:8192]...), make([]byte, len(good)-8192)...),
	}
	for name, b := range bad {
		err := checkBytes(t, b)
		var lse *LogStoreError
		if !errors.As(err, &lse) {
			t.Fatalf("%s: %v, want a LogStoreError", name, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "move it away") {
			t.Fatalf("%s: %q is not one line saying what to do", name, msg)
		}
	}
}

// Whatever raft.db holds, checking it is an answer, never a panic or a
// fault that kills the process.
func FuzzCheckLogStore(f *testing.F) {
	good := validLogStore(f, 512, 3)
	// bbolt pads a new file to 32 KiB; the pages in use are enough (and
	// keep minimising an input short).
	m, ok := readMeta(good)
	if !ok || int(m.pgid)*512 > len(good) {
		f.Fatalf("seed: meta %+v %v", m, ok)
	}
	good = good[:max(int(m.pgid)*512, 4096)] // bbolt reads 4 KiB to find the page size
	if err := checkBytes(f, good); err != nil {
		f.Fatalf("the trimmed seed: %v", err)
	}
	f.Add(good)
	f.Add(good[:1024])
	f.Add([]byte("hello"))
	path := filepath.Join(f.TempDir(), "raft.db")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkLogStore(path)
		var lse *LogStoreError
		if err != nil && !errors.As(err, &lse) {
			t.Fatalf("%T %v", err, err)
		}
	})
}

// A raft.db another process holds (a node running on the same data
// directory) is said to be in use, not to be damaged, and is not waited on.
func TestLogStoreInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	held, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = CurrentVoters(filepath.Dir(path)) // opens it as recovery does
	var inUse errStoreInUse
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "stop the node first") || strings.Contains(err.Error(), "not a valid") {
		t.Fatalf("a held raft.db: %v", err)
	}
}
