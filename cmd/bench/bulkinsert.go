package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// bulkInsertSection compares the streaming bulk insert (POST /bulk_insert)
// with raw SQLite, with bulk_docs (4 clients, batches of c.batch) and, when
// a PostgreSQL is given (-pg), with pgx batches of 1000 and COPY on 4
// connections, in interleaved rounds.
func bulkInsertSection(out io.Writer, c config, url string) error {
	const clients = 4
	docs := makeDocs(c.docs)
	fmt.Fprintf(out, "\n## Streaming bulk insert: %d documents of ~%d bytes, %d rounds (bulk insert: %d streams; bulk_docs: %d clients x %d per request; raw SQLite: %d per transaction)\n",
		c.docs, len(docs[0].body), c.rounds, clients, clients, c.batch, c.batch)
	var pgDSN string
	switch c.pg {
	case "":
		fmt.Fprintf(out, "PostgreSQL: skipped (no -pg)\n")
	case "auto":
		dsn, stop, err := startPostgres()
		if err != nil {
			fmt.Fprintf(out, "PostgreSQL: skipped: no PostgreSQL (%v)\n", err)
		} else {
			defer stop()
			pgDSN = dsn
			fmt.Fprintf(out, "PostgreSQL: a throwaway server from %s (synchronous_commit=on, fsync=on)\n", pgBinDir())
		}
	default:
		pgDSN = c.pg
	}
	var raws, bis, bds, pgbs, pgcs []float64
	for r := 0; r < c.rounds; r++ {
		raw, err := rawSQLite(filepath.Join(c.dir, fmt.Sprintf("bi-raw-%d.db", r)), docs, c.batch)
		if err != nil {
			return err
		}
		bi, err := streamInsert(url, fmt.Sprintf("bis%d", r), docs, clients)
		if err != nil {
			return err
		}
		bd, err := httpInsert(url, fmt.Sprintf("bid%d", r), docs, c.batch, clients)
		if err != nil {
			return err
		}
		raws, bis, bds = append(raws, raw), append(bis, bi), append(bds, bd)
		line := fmt.Sprintf("round %d: raw %6.0f, bulk insert %6.0f (%.2fx raw, %.2fx bulk_docs), bulk_docs %6.0f", r+1, raw, bi, bi/raw, bi/bd, bd)
		if pgDSN != "" {
			pb, pc, err := postgresInsert(pgDSN, docs, clients, 1000)
			if err != nil {
				return err
			}
			pgbs, pgcs = append(pgbs, pb), append(pgcs, pc)
			line += fmt.Sprintf(", pg batches %6.0f, pg COPY %6.0f", pb, pc)
		}
		fmt.Fprintln(out, line+" docs/s")
	}
	raw, bi, bd := median(raws), median(bis), median(bds)
	fmt.Fprintf(out, "raw SQLite (same schema, WAL, synchronous=FULL): %8.0f docs/s (median)\n", raw)
	fmt.Fprintf(out, "bulk insert, %d streams:                         %8.0f docs/s  %.2fx raw (target >= 0.9x), %.2fx bulk_docs (target >= 1.1x)\n", clients, bi, bi/raw, bi/bd)
	fmt.Fprintf(out, "bulk_docs, %d clients x %d:                    %8.0f docs/s  %.2fx raw\n", clients, c.batch, bd, bd/raw)
	if len(pgbs) > 0 {
		pb, pc := median(pgbs), median(pgcs)
		fmt.Fprintf(out, "PostgreSQL pgx batches of 1000, %d conns:        %8.0f docs/s  bulk_docs/pg %.2fx (target >= 1.0x)\n", clients, pb, bd/pb)
		fmt.Fprintf(out, "PostgreSQL COPY, %d conns:                       %8.0f docs/s  bulk insert/COPY %.2fx (target >= 0.7x)\n", clients, pc, bi/pc)
	}
	return nil
}

// streamInsert sends the documents through POST /bulk_insert, split over
// `streams` concurrent bulk inserts, and returns docs/s.
func streamInsert(url, db string, docs []benchDoc, streams int) (float64, error) {
	if err := createDB(url, db); err != nil {
		return 0, err
	}
	bodies := make([][]byte, streams)
	per := (len(docs) + streams - 1) / streams
	for s := range bodies {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := s * per; i < min((s+1)*per, len(docs)); i++ {
			if i > s*per {
				b.WriteByte(',')
			}
			b.WriteString(`{"Id":"` + docs[i].id + `","Type":"PUT","Document":`)
			b.Write(docs[i].body)
			b.WriteByte('}')
		}
		b.WriteByte(']')
		bodies[s] = b.Bytes()
	}
	var next atomic.Int64
	elapsed, err := parallel(streams, func() error {
		body := bodies[next.Add(1)-1]
		idb, code, err := do("GET", url+"/databases/"+db+"/operations/next-operation-id", nil)
		if err != nil || code != 200 {
			return fmt.Errorf("next-operation-id: %d %v", code, err)
		}
		var op struct{ Id int64 }
		if err := json.Unmarshal(idb, &op); err != nil {
			return err
		}
		b, code, err := do("POST", url+"/databases/"+db+"/bulk_insert?id="+strconv.FormatInt(op.Id, 10), body)
		if err != nil {
			return err
		}
		if code != 201 {
			return fmt.Errorf("bulk insert: %d %s", code, b)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(len(docs)) / elapsed.Seconds(), nil
}

// postgresInsert loads the documents into a fresh table (key text primary
// key, body jsonb) twice: pgx batches of `batch` inserts (one implicit
// transaction each) and COPY (one per connection), on `conns` connections
// with synchronous_commit=on.
func postgresInsert(dsn string, docs []benchDoc, conns, batch int) (float64, float64, error) {
	ctx := context.Background()
	cs := make([]*pgx.Conn, conns)
	for i := range cs {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, 0, fmt.Errorf("postgres: %w", err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `SET synchronous_commit = on`); err != nil {
			return 0, 0, err
		}
		cs[i] = c
	}
	reset := func() error {
		_, err := cs[0].Exec(ctx, `DROP TABLE IF EXISTS rookery_bench_docs; CREATE TABLE rookery_bench_docs (key text PRIMARY KEY, body jsonb NOT NULL)`)
		return err
	}
	if err := reset(); err != nil {
		return 0, 0, err
	}
	var next atomic.Int64
	var chunk atomic.Int64
	elapsed, err := parallel(conns, func() error {
		c := cs[next.Add(1)-1]
		for {
			i := int(chunk.Add(1)-1) * batch
			if i >= len(docs) {
				return nil
			}
			b := &pgx.Batch{}
			for j := i; j < min(i+batch, len(docs)); j++ {
				b.Queue(`INSERT INTO rookery_bench_docs(key, body) VALUES($1, $2)`, strings.ToLower(docs[j].id), string(docs[j].body))
			}
			if err := c.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres batches: %w", err)
	}
	batchRate := float64(len(docs)) / elapsed.Seconds()
	if err := reset(); err != nil {
		return 0, 0, err
	}
	next.Store(0)
	per := (len(docs) + conns - 1) / conns
	elapsed, err = parallel(conns, func() error {
		k := int(next.Add(1) - 1)
		c := cs[k]
		part := docs[k*per : min((k+1)*per, len(docs))]
		rows := make([][]any, len(part))
		for i, d := range part {
			rows[i] = []any{strings.ToLower(d.id), string(d.body)}
		}
		_, err := c.CopyFrom(ctx, pgx.Identifier{"rookery_bench_docs"}, []string{"key", "body"}, pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres COPY: %w", err)
	}
	copyRate := float64(len(docs)) / elapsed.Seconds()
	_, _ = cs[0].Exec(ctx, `DROP TABLE IF EXISTS rookery_bench_docs`)
	return batchRate, copyRate, nil
}

// pgBinDir is Debian's PostgreSQL binaries directory ("" when absent).
func pgBinDir() string {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p)
		}
		return ""
	}
	return filepath.Dir(m[len(m)-1])
}

// startPostgres runs a throwaway PostgreSQL (initdb in a temporary
// directory, a free port on 127.0.0.1) and returns its DSN and a stop
// function, which also runs on SIGINT/SIGTERM before the bench exits.
func startPostgres() (string, func(), error) {
	bin := pgBinDir()
	if bin == "" {
		return "", nil, errors.New("initdb not found (apt-get install postgresql)")
	}
	// Its own directory under the system temp dir: the postgres user must
	// be able to reach it.
	dir, err := os.MkdirTemp("", "rookery-bench-pg")
	if err != nil {
		return "", nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", nil, err
	}
	// PostgreSQL refuses to run as root: run it as the postgres user.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("running as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, data} {
			if err := os.Chown(p, uid, gid); err != nil {
				return "", nil, err
			}
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		// Its own process group (the terminal's interrupt reaches the
		// bench, which stops it), as the postgres user when we are root.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		return cmd
	}
	// From here on an interrupt stops whatever runs (initdb, then the
	// server) and removes the directory before the bench exits.
	var mu sync.Mutex
	var running *exec.Cmd
	var exited chan struct{}
	var once sync.Once
	sigs := make(chan os.Signal, 1)
	stop := func() {
		once.Do(func() {
			signal.Stop(sigs)
			mu.Lock()
			cmd, ex := running, exited
			mu.Unlock()
			if cmd != nil && cmd.Process != nil {
				// SIGINT is PostgreSQL's fast shutdown.
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
				select {
				case <-ex:
				case <-time.After(20 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-ex
				}
			}
			_ = os.RemoveAll(dir)
		})
	}
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			stop()
			fmt.Fprintln(os.Stderr, "bench: interrupted; the throwaway PostgreSQL is stopped and removed")
			os.Exit(1)
		}
	}()
	var logBuf bytes.Buffer
	launch := func(cmd *exec.Cmd) error {
		cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
		mu.Lock()
		defer mu.Unlock()
		if err := cmd.Start(); err != nil {
			return err
		}
		ex := make(chan struct{})
		go func() { _ = cmd.Wait(); close(ex) }()
		running, exited = cmd, ex
		return nil
	}
	initdb := command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
	if err := launch(initdb); err != nil {
		stop()
		return "", nil, err
	}
	mu.Lock()
	ex := exited
	mu.Unlock()
	<-ex
	if !initdb.ProcessState.Success() {
		stop()
		return "", nil, fmt.Errorf("initdb: %s", lastLine(logBuf.Bytes()))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logBuf.Reset()
	srv := command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "shared_buffers=256MB", "-c", "max_wal_size=4GB")
	if err := launch(srv); err != nil {
		stop()
		return "", nil, err
	}
	mu.Lock()
	ex = exited
	mu.Unlock()
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, dsn)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return dsn, stop, nil
		}
		select {
		case <-ex:
			stop()
			return "", nil, fmt.Errorf("postgres exited: %s", lastLine(logBuf.Bytes()))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("postgres did not accept connections: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
