package index

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A paused index indexes nothing until Resume, shows why in its stale
// reasons and Stats, fails WaitNonStale at once, and stays paused when
// reopened (the reason is in its file); Resume continues from where it
// stopped (only the new documents are mapped); Reset drops the pause with
// the file and rebuilds.
func TestPauseSurvivesReopenResumeAndReset(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer func() { db.Close() }()
	for i := 0; i < 30; i++ {
		put(t, db, [3]string{fmt.Sprintf("orders/%d", i), "Orders", fmt.Sprintf(`{"N":%d}`, i)})
	}
	def := Definition{Name: "Auto/Orders/ByN", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{{Name: "N"}}}
	path := FilePath(filepath.Join(dir, "db.sqlite"), def.Name)
	ix, err := Open(path, def, db, Options{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	const reason = "stopped by the test"
	if err := ix.Pause(reason); err != nil {
		t.Fatal(err)
	}
	at := ix.LastIndexedEtag()
	for i := 100; i < 120; i++ {
		put(t, db, [3]string{fmt.Sprintf("orders/%d", i), "Orders", fmt.Sprintf(`{"N":%d}`, i)})
	}
	paused := func(ix *Index) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // a running writer indexes 20 documents well within this
		if got := ix.LastIndexedEtag(); got != at {
			t.Fatalf("the paused index moved from etag %d to %d", at, got)
		}
		st := ix.Stats()
		if st.Paused != reason || ix.PauseReason() != reason || st.State != StateNormal || !st.IsStale ||
			!strings.Contains(strings.Join(st.StaleReasons, "|"), "Indexing is paused on this node: "+reason) {
			t.Fatalf("stats of the paused index %+v", st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := ix.WaitNonStale(ctx, 0); err == nil || !strings.Contains(err.Error(), "paused") || time.Since(start) > 2*time.Second {
			t.Fatalf("WaitNonStale on a paused index: %v after %s", err, time.Since(start))
		}
	}
	paused(ix)
	ix.Close()
	ix, err = Open(path, def, db, Options{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	paused(ix)

	if was, err := ix.Resume(); !was || err != nil {
		t.Fatalf("resume: %v %v", was, err)
	}
	wait(t, ix)
	if st := ix.Stats(); st.Paused != "" || st.MapAttempts != 20 {
		t.Fatalf("after resume: paused %q, %d documents mapped (want only the 20 new ones)", st.Paused, st.MapAttempts)
	}
	if was, err := ix.Resume(); was || err != nil {
		t.Fatalf("resuming an index that is not paused: %v %v", was, err)
	}
	eq(t, "N >= 118", ids(t, ix, "N >= 118", nil), []string{"orders/118", "orders/119"})

	if err := ix.Pause(reason); err != nil {
		t.Fatal(err)
	}
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	if st := ix.Stats(); st.Paused != "" || st.MapAttempts != 50 {
		t.Fatalf("after reset: paused %q, %d documents mapped (want all 50)", st.Paused, st.MapAttempts)
	}
	ix.Close()
	ix, err = Open(path, def, db, Options{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if r := ix.PauseReason(); r != "" {
		t.Fatalf("a reset index reopened paused: %q", r)
	}
}
