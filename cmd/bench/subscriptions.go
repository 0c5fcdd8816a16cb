package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/client"
)

// subscriptionDelivery measures how fast one worker (the Go client, over
// the TCP worker protocol on loopback) receives a whole collection, against
// the ceiling of the same run: the raw etag-ordered scan of that collection
// in the storage engine, in pages of the same size, doing nothing with the
// documents.
func subscriptionDelivery(out io.Writer, dir string, n, rounds int) error {
	srv, url, stop, err := startServer(filepath.Join(dir, "subscriptions"))
	if err != nil {
		return err
	}
	defer stop()
	if _, err := httpInsert(url, "subs", makeDocs(n), 1000, 4); err != nil {
		return err
	}
	db, err := srv.Catalog().Get("subs")
	if err != nil {
		return err
	}
	store := client.NewDocumentStore([]string{url}, "subs")
	defer store.Close()
	const batch = 4096
	var scan, plain, filtered []float64
	for r := range rounds {
		s, err := scanRate(db, n, batch)
		if err != nil {
			return err
		}
		scan = append(scan, s)
		p, err := deliveryRate(store, fmt.Sprintf("plain-%d", r), "from Users", n, batch)
		if err != nil {
			return err
		}
		plain = append(plain, p)
		f, err := deliveryRate(store, fmt.Sprintf("filtered-%d", r), "from Users where age >= 20 and address.city = 'Springfield'", n, batch)
		if err != nil {
			return err
		}
		filtered = append(filtered, f)
	}
	ceiling := median(scan)
	fmt.Fprintf(out, "raw etag scan of the collection (ceiling)   %8.0f docs/s   (rounds %.0f–%.0f)\n", ceiling, minOf(scan), maxOf(scan))
	fmt.Fprintf(out, "delivery to one worker, from Users          %8.0f docs/s   %.2fx of the scan (rounds %.0f–%.0f)\n", median(plain), median(plain)/ceiling, minOf(plain), maxOf(plain))
	fmt.Fprintf(out, "delivery to one worker, with a where clause %8.0f docs/s   %.2fx of the scan (rounds %.0f–%.0f)\n", median(filtered), median(filtered)/ceiling, minOf(filtered), maxOf(filtered))
	return nil
}

// scanRate reads the whole collection in etag order, batch documents per
// query, as a subscription's scan does.
func scanRate(db *storage.DB, n, batch int) (float64, error) {
	ctx := context.Background()
	start := time.Now()
	after, seen := int64(0), 0
	for {
		got := 0
		err := db.ScanCollection(ctx, "Users", after, batch, func(d *storage.Document) error {
			got++
			after = d.Etag
			return nil
		})
		if err != nil {
			return 0, err
		}
		if got == 0 {
			break
		}
		seen += got
	}
	if seen != n {
		return 0, fmt.Errorf("scan saw %d documents, want %d", seen, n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// deliveryRate creates a subscription from the beginning of time and runs
// one worker until it has acknowledged all n documents.
func deliveryRate(store *client.DocumentStore, name, query string, n, batch int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := store.Subscriptions().Create(ctx, client.SubscriptionOptions{Name: name, Query: query}); err != nil {
		return 0, err
	}
	seen := 0
	done := make(chan struct{})
	w := store.Subscriptions().GetWorker(client.WorkerOptions{Name: name, MaxDocsPerBatch: batch, RetryDelay: 100 * time.Millisecond,
		OnAcknowledged: func(b *client.Batch) {
			seen += len(b.Items)
			if seen == n {
				close(done)
			}
		}})
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- w.Run(ctx, func(context.Context, *client.Batch) error { return nil })
	}()
	select {
	case <-done:
	case err := <-errc:
		return 0, fmt.Errorf("worker stopped after %d of %d documents: %v", seen, n, err)
	}
	elapsed := time.Since(start)
	cancel()
	<-errc
	if err := store.Subscriptions().Delete(context.Background(), name); err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}
