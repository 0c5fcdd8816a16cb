package storage

import (
	"database/sql"
	"time"
)

// Checkpoints (see DESIGN.md, "Checkpoints off the write path"): the
// writer's own automatic checkpoint is moved out to writerAutoCheckpoint
// pages, and a checkpointer goroutine runs a PASSIVE checkpoint on its own
// connection after commits, at most every checkpointEvery, so the writer
// does not copy WAL pages into the file while every queued write waits.
const (
	writerAutoCheckpoint = 16384 // pages (64 MiB at 4 KiB pages)
	writerCacheKiB       = 32768 // the writer's page cache, KiB
	checkpointEvery      = 200 * time.Millisecond
)

type checkpointer struct {
	conn *sql.DB
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func startCheckpointer(path string) (*checkpointer, error) {
	c, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, err
	}
	c.SetMaxOpenConns(1)
	c.SetMaxIdleConns(1)
	c.SetConnMaxLifetime(0)
	cp := &checkpointer{conn: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go cp.loop()
	return cp, nil
}

// notify tells the checkpointer a commit happened; it never blocks.
func (cp *checkpointer) notify() {
	if cp == nil {
		return
	}
	select {
	case cp.kick <- struct{}{}:
	default:
	}
}

func (cp *checkpointer) loop() {
	defer close(cp.done)
	var last time.Time
	for {
		select {
		case <-cp.stop:
			return
		case <-cp.kick:
		}
		if wait := checkpointEvery - time.Since(last); wait > 0 {
			select {
			case <-cp.stop:
				return
			case <-time.After(wait):
			}
		}
		// PASSIVE never waits for readers or the writer; whatever it
		// cannot copy now is copied next time.
		_, _ = cp.conn.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		last = time.Now()
	}
}

func (cp *checkpointer) close() error {
	if cp == nil {
		return nil
	}
	close(cp.stop)
	<-cp.done
	return cp.conn.Close()
}
