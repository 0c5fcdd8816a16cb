package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// countersBench measures counter increments batched 100 per bulk_docs
// from 4 clients against plain document puts in the same run (documents
// batched alike), interleaved rounds on one server.
func countersBench(out io.Writer, c config, url string) error {
	const perRequest, clients, counterDocs = 100, 4, 100
	n := c.counterIncs
	fmt.Fprintf(out, "\n## Counters (extensions): %d increments and %d document puts per round, %d per bulk_docs, %d clients\n", n, n, perRequest, clients)
	db := "bench-counters"
	if err := createDB(url, db); err != nil {
		return err
	}
	// The counted documents.
	seed := make([]benchDoc, counterDocs)
	for i := range seed {
		seed[i] = benchDoc{id: fmt.Sprintf("counted/%d", i), body: []byte(`{"@metadata":{"@collection":"Counted"}}`)}
	}
	if _, err := postBodies(http.DefaultClient, url, db, bulkBodies(seed, perRequest), 1, len(seed)); err != nil {
		return err
	}
	var incRates, putRates []float64
	for round := 0; round < c.rounds; round++ {
		var bodies [][]byte
		for i := 0; i < n; i += perRequest {
			var b strings.Builder
			b.WriteString(`{"Commands":[`)
			for j := i; j < min(i+perRequest, n); j++ {
				if j > i {
					b.WriteByte(',')
				}
				doc := fmt.Sprintf("counted/%d", j%counterDocs)
				fmt.Fprintf(&b, `{"Type":"Counters","Id":%q,"Counters":{"DocumentId":%q,"Operations":[{"Type":"Increment","CounterName":"c%d","Delta":1}]}}`, doc, doc, j%7)
			}
			b.WriteString(`]}`)
			bodies = append(bodies, []byte(b.String()))
		}
		inc, err := postBodies(http.DefaultClient, url, db, bodies, clients, n)
		if err != nil {
			return err
		}
		docs := make([]benchDoc, n)
		for i := range docs {
			docs[i] = benchDoc{id: fmt.Sprintf("plain/%d-%d", round, i), body: []byte(`{"N":1,"@metadata":{"@collection":"Plain"}}`)}
		}
		put, err := postBodies(http.DefaultClient, url, db, bulkBodies(docs, perRequest), clients, n)
		if err != nil {
			return err
		}
		incRates, putRates = append(incRates, inc), append(putRates, put)
	}
	fmt.Fprintf(out, "counter increments/s: median %.0f (min %.0f, max %.0f)\n", median(incRates), minOf(incRates), maxOf(incRates))
	fmt.Fprintf(out, "document puts/s:      median %.0f (min %.0f, max %.0f)\n", median(putRates), minOf(putRates), maxOf(putRates))
	return nil
}
