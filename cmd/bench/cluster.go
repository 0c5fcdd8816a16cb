package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/web"
)

type benchNode struct {
	srv  *web.Server
	url  string
	stop func()
}

func startBenchNode(dir, tag, join string) (*benchNode, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + l.Addr().String()
	srv, err := web.New(web.Config{HTTPAddr: l.Addr().String(), RaftAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, tag), NodeTag: tag, Join: join,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 200 * time.Millisecond})
	if err != nil {
		l.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	return &benchNode{srv: srv, url: url, stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}}, nil
}

// clusterIdentities measures identity ids/s through a 3-node Raft cluster,
// on the leader and through a follower (which forwards to the leader), single
// and batched, and HiLo ids/s from the follower in the same run.
func clusterIdentities(out io.Writer, dir string, single, batched, hiloIDs int) error {
	a, err := startBenchNode(dir, "A", "")
	if err != nil {
		return err
	}
	defer a.stop()
	b, err := startBenchNode(dir, "B", a.url)
	if err != nil {
		return err
	}
	defer b.stop()
	c, err := startBenchNode(dir, "C", a.url)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := createDB(a.url, "ident3"); err != nil {
		return err
	}
	leader, follower := a, b
	if !a.srv.Cluster().IsLeader() {
		leader, follower = b, a
		if !b.srv.Cluster().IsLeader() {
			leader, follower = c, a
		}
	}
	for _, side := range []struct {
		name string
		n    *benchNode
	}{{"leader", leader}, {"follower (forwards)", follower}} {
		rate, err := identityRate(side.n.url+"/databases/ident3/docs?id=p%7C", single)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "3 nodes, single identity PUTs on the %-20s %8.0f ids/s\n", side.name+":", rate)
	}
	const per = 100
	var sb strings.Builder
	sb.WriteString(`{"Commands":[`)
	for j := 0; j < per; j++ {
		if j > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"Id":"q|","Type":"PUT","Document":{"@metadata":{"@collection":"Q"}}}`)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	start := time.Now()
	for i := 0; i < batched; i += per {
		if err := expect201("POST", follower.url+"/databases/ident3/bulk_docs", body); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "3 nodes, batched identities (%d per bulk_docs) via the follower: %8.0f ids/s\n", per, float64(batched)/time.Since(start).Seconds())
	store := client.NewDocumentStore([]string{follower.url}, "ident3")
	defer store.Close()
	ctx := context.Background()
	if _, err := store.GenerateID(ctx, "warm"); err != nil {
		return err
	}
	start = time.Now()
	for i := 0; i < hiloIDs; i++ {
		if _, err := store.GenerateID(ctx, "users"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "3 nodes, HiLo ids from the Go client on the follower (same run): %8.0f ids/s\n", float64(hiloIDs)/time.Since(start).Seconds())
	return nil
}

func identityRate(url string, n int) (float64, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := expect201("PUT", url, []byte(`{"@metadata":{"@collection":"P"}}`)); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
