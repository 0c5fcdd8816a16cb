package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/conflicts"
)

// startLimited runs the binary with RLIMIT_NOFILE lowered to nofile (soft
// and hard, so Go cannot raise it) through prlimit(1).
// The returned stop kills it (once) and waits, after which n.logs may be
// read.
func startLimited(t *testing.T, nofile int, extra ...string) (n *node, stop func()) {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	addr := freeAddr(t)
	dataDir := t.TempDir()
	n = &node{url: "http://" + addr, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	args := []string{"--nofile=" + strconv.Itoa(nofile) + ":" + strconv.Itoa(nofile), "--", binary, "serve", "--http", addr, "--data-dir", dataDir,
		"--node-tag", "A", "--raft-addr", raftAddrFor(t, dataDir)}
	n.cmd = exec.Command(prlimit, append(args, extra...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	var once sync.Once
	stop = func() { once.Do(func() { n.kill9(t) }) }
	t.Cleanup(stop)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(n.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n, stop
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	t.Fatalf("node did not become ready; logs:\n%s", n.logs)
	return nil, nil
}

// exhaust opens count idle connections (they send nothing), holds them for
// hold, then closes them all.
func exhaust(t *testing.T, addr string, count int, hold time.Duration) {
	t.Helper()
	var conns []net.Conn
	for i := 0; i < count; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			// The old accept loop closed the listening socket on EMFILE.
			t.Logf("dial %d: %v", i, err)
			break
		}
		conns = append(conns, c)
	}
	time.Sleep(hold)
	for _, c := range conns {
		c.Close()
	}
}

// serves waits until a normal request succeeds again.
func serves(t *testing.T, n *node, within time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(n.url + "/databases")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not serve %v after the idle connections closed: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one sample from /metrics; 0 when absent.
func metric(t *testing.T, n *node, series string) float64 {
	t.Helper()
	resp, err := http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
	}
	return 0
}

// Finding 8: at about 20k idle connections accept failed with EMFILE and
// the HTTP listener stayed dead after the clients left. Replayed with the
// descriptor limit lowered to 512 and 900 idle connections.
func TestSecurityF8DescriptorExhaustionRecovers(t *testing.T) {
	t.Run("default cap", func(t *testing.T) {
		// The default cap (3/4 of 512, minus 256 = 128 connections) keeps
		// the extra connections in the kernel's backlog: the process never
		// runs out of descriptors.
		n, _ := startLimited(t, 512)
		exhaust(t, strings.TrimPrefix(n.url, "http://"), 900, time.Second)
		serves(t, n, 15*time.Second)
		if v := metric(t, n, `rookery_http_accept_errors_total{reason="emfile"}`); v != 0 {
			t.Fatalf("%v accepts failed with EMFILE under the default cap", v)
		}
		if v := metric(t, n, "rookery_http_max_connections"); v != 128 {
			t.Fatalf("rookery_http_max_connections %v, want 128", v)
		}
	})
	t.Run("no cap", func(t *testing.T) {
		// Without a cap the descriptors do run out: accept fails with
		// EMFILE, and the listener keeps trying until they are back.
		n, stop := startLimited(t, 512, "--max-connections", "-1")
		exhaust(t, strings.TrimPrefix(n.url, "http://"), 900, time.Second)
		serves(t, n, 15*time.Second)
		if v := metric(t, n, `rookery_http_accept_errors_total{reason="emfile"}`); v < 1 {
			t.Fatalf("no EMFILE counted (%v): the test did not exhaust the descriptors", v)
		}
		stop() // the logs are complete once the process is gone
		if !strings.Contains(n.logs.String(), "accept failed; retrying") {
			t.Fatalf("no log of the failed accepts:\n%s", n.logs)
		}
	})
}

// The limit flags take sizes with units, are mirrored by ROOKERY_*
// variables, and default to web's defaults.
func TestResourceLimitFlags(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.maxRequestBody != 128<<20 || o.maxDocumentSize != 32<<20 || o.minDataRate != 240 || o.minDataRateGrace != 5*time.Second || o.maxLivePages != 512 || o.maxConnections != 0 {
		t.Fatalf("defaults %+v", o)
	}
	t.Setenv("ROOKERY_MAX_REQUEST_BODY", "64MiB")
	o, err = parse([]string{"--max-document-size", "1.5MiB"}, io.Discard)
	if err == nil {
		t.Fatal("a fractional size was accepted")
	}
	o, err = parse([]string{"--max-document-size", "512KiB", "--max-connections", "-1"}, io.Discard)
	if err != nil || o.maxRequestBody != 64<<20 || o.maxDocumentSize != 512<<10 || o.maxConnections != -1 {
		t.Fatalf("%+v %v", o, err)
	}
	for in, want := range map[string]int64{"1048576": 1 << 20, "16M": 16 << 20, "2GB": 2e9, "-1": -1, "0": 0} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Fatalf("%q: %d %v", in, b, err)
		}
	}
	for _, bad := range []string{"", "MiB", "-2", "12XB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// --conflict-script-time-limit defaults to the engine's limit and is
// mirrored by ROOKERY_CONFLICT_SCRIPT_TIME_LIMIT.
func TestConflictScriptTimeLimitFlag(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil || o.conflictScriptTimeLimit != conflicts.DefaultTimeLimit {
		t.Fatalf("default %v %v", o.conflictScriptTimeLimit, err)
	}
	t.Setenv("ROOKERY_CONFLICT_SCRIPT_TIME_LIMIT", "2s")
	if o, err = parse(nil, io.Discard); err != nil || o.conflictScriptTimeLimit != 2*time.Second {
		t.Fatalf("from the environment: %v %v", o.conflictScriptTimeLimit, err)
	}
	if o, err = parse([]string{"--conflict-script-time-limit", "250ms"}, io.Discard); err != nil || o.conflictScriptTimeLimit != 250*time.Millisecond {
		t.Fatalf("flag over the environment: %v %v", o.conflictScriptTimeLimit, err)
	}
}
