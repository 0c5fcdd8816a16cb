package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/changes"
	"github.com/rookerydb/rookery/client"
)

// The changes section: the Changes API's fan-out latency to many
// subscribers at a steady write rate, and what those subscribers cost the
// writes. The subscribers run in a child process (this binary again, with
// changesChildEnv set), so their CPU is not the bench's own; rounds
// alternate between no subscribers and all of them, in alternating order.

// changesChildEnv, when set ("url|database|subscribers"), makes the process
// the subscriber child: it opens that many Changes connections, each
// watching every document, prints "ready", and when its stdin closes
// prints the latencies it saw as JSON and exits.
const changesChildEnv = "ROOKERY_BENCH_CHANGES_CHILD"

type changesChildReport struct {
	Received int   `json:"received"`
	P50us    int64 `json:"p50us"`
	P99us    int64 `json:"p99us"`
	MaxUs    int64 `json:"maxus"`
	Dropped  int   `json:"dropped"` // subscriptions that ended early
}

// changesChild is the subscriber process.
func changesChild(spec string, stdin io.Reader, stdout io.Writer) error {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		return fmt.Errorf("bad %s %q", changesChildEnv, spec)
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return err
	}
	store := client.NewDocumentStore([]string{parts[0]}, parts[1])
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var lats []time.Duration
	dropped := 0
	var wg sync.WaitGroup
	var conns []*client.Changes
	for range n {
		ch, err := store.Changes(ctx, "")
		if err != nil {
			return err
		}
		conns = append(conns, ch)
		sub, err := ch.ForAllDocuments(ctx)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 16384) // grown while writes run, it was part of what the child measured
			for c := range sub.C {
				// ids are changes/<unix nanoseconds when the write was sent>
				_, ns, ok := strings.Cut(c.ID, "/")
				if !ok {
					continue
				}
				sent, err := strconv.ParseInt(ns, 10, 64)
				if err != nil {
					continue
				}
				mine = append(mine, time.Since(time.Unix(0, sent)))
			}
			mu.Lock()
			lats = append(lats, mine...)
			if err := sub.Err(); err != nil && err != client.ErrChangesClosed {
				dropped++
			}
			mu.Unlock()
		}()
	}
	fmt.Fprintln(stdout, "ready")
	_, _ = io.Copy(io.Discard, stdin) // until the parent closes it
	for _, ch := range conns {
		ch.Close()
	}
	wg.Wait()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	r := changesChildReport{Received: len(lats), Dropped: dropped}
	if len(lats) > 0 {
		r.P50us = percentile(lats, 0.5).Microseconds()
		r.P99us = percentile(lats, 0.99).Microseconds()
		r.MaxUs = lats[len(lats)-1].Microseconds()
	}
	return json.NewEncoder(stdout).Encode(r)
}

// changesSubscribers starts the child with n subscribers and waits until
// they are all subscribed.
type changesSubscribers struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

func startChangesSubscribers(url, db string, n int) (*changesSubscribers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), changesChildEnv+"="+url+"|"+db+"|"+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &changesSubscribers{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out)}
	line, err := s.stdout.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		return nil, fmt.Errorf("subscriber child: %q %v", line, err)
	}
	return s, nil
}

func (s *changesSubscribers) finish() (changesChildReport, error) {
	s.stdin.Close()
	var r changesChildReport
	err := json.NewDecoder(s.stdout).Decode(&r)
	if werr := s.cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	return r, err
}

// changesWrites puts one small document every 1/rate s for dur (16
// writers take them from a schedule) and returns each write's latency.
func changesWrites(url, db string, rate int, dur time.Duration) ([]time.Duration, error) {
	total := int(float64(rate) * dur.Seconds())
	interval := time.Second / time.Duration(rate)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	jobs := make(chan struct{}, 1024)
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				start := time.Now()
				id := "changes/" + strconv.FormatInt(start.UnixNano(), 10)
				req, _ := http.NewRequest("PUT", url+"/databases/"+db+"/docs?id="+id, strings.NewReader(`{"n":1,"@metadata":{"@collection":"Changes"}}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 201 {
						err = fmt.Errorf("PUT %s: %d", id, resp.StatusCode)
					}
				}
				d := time.Since(start)
				mu.Lock()
				lats = append(lats, d)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	begin := time.Now()
	for i := range total {
		if wait := time.Until(begin.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	hc.CloseIdleConnections()
	return lats, firstErr
}

// changesBench runs the section.
func changesBench(out io.Writer, url string, subs, rate int, dur time.Duration, rounds int) error {
	const db = "changes-bench"
	if err := createDB(url, db); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n## Changes API: %d subscribers (Go client, one websocket each, forAllDocuments, in a child process) at %d writes/s (single PUTs, 16 writers), %s per round, %d rounds alternating with no subscribers; the server's defaults (--changes-frame-budget %d: a frame every %s per subscriber)\n",
		subs, rate, dur, rounds, changes.DefaultFrameBudget, max(changes.DefaultFrameInterval, time.Duration(subs)*time.Second/changes.DefaultFrameBudget))
	var none, with []time.Duration
	var fan []changesChildReport
	writes := 0
	for r := range rounds {
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, withSubs := range order {
			if !withSubs {
				lats, err := changesWrites(url, db, rate, dur)
				if err != nil {
					return err
				}
				none = append(none, lats...)
				fmt.Fprintf(out, "round %d, no subscribers:   write p50 %s  p99 %s\n", r+1, ms(pct(lats, 50)), ms(pct(lats, 99)))
				continue
			}
			child, err := startChangesSubscribers(url, db, subs)
			if err != nil {
				return err
			}
			lats, err := changesWrites(url, db, rate, dur)
			time.Sleep(500 * time.Millisecond) // the last frames
			rep, ferr := child.finish()
			if err != nil {
				return err
			}
			if ferr != nil {
				return ferr
			}
			with = append(with, lats...)
			fan = append(fan, rep)
			writes += len(lats)
			fmt.Fprintf(out, "round %d, %d subscribers: write p50 %s  p99 %s; fan-out p50 %.2f ms  p99 %.2f ms  max %.2f ms, %d of %d notifications, %d subscriptions dropped\n",
				r+1, subs, ms(pct(lats, 50)), ms(pct(lats, 99)), float64(rep.P50us)/1000, float64(rep.P99us)/1000, float64(rep.MaxUs)/1000, rep.Received, len(lats)*subs, rep.Dropped)
		}
	}
	p99n, p99w := pct(none, 99), pct(with, 99)
	var p50s, p99s []float64
	received := 0
	for _, f := range fan {
		p50s, p99s = append(p50s, float64(f.P50us)/1000), append(p99s, float64(f.P99us)/1000)
		received += f.Received
	}
	fmt.Fprintf(out, "fan-out latency (write sent to notification read, per subscriber): p50 %.2f ms, p99 %.2f ms (median of rounds); %d of %d notifications delivered\n", median(p50s), median(p99s), received, writes*subs)
	fmt.Fprintf(out, "document write p99: %s with %d subscribers, %s with none: %.2fx (target <= 1.2x)\n", ms(p99w), subs, ms(p99n), float64(p99w)/float64(max(p99n, 1)))
	return nil
}
