package storage

import (
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/changevector"
)

// Counter and time-series changes for OnItemCommit hooks (the Changes
// API's CounterChange and TimeSeriesChange). Nothing here runs unless
// tx.wantItems.

// localCV is this copy's change-vector entry for etag.
func (tx *Tx) localCV(etag int64) string {
	return tx.db.nodeTag + ":" + strconv.FormatInt(etag, 10) + "-" + tx.db.dbid
}

// counterCV is a counter's change vector: one "tag:etag-dbid" per copy
// that has a part, in the row's order (by database id).
func counterCV(parts []CounterPart) string {
	v := make(changevector.Vector, len(parts))
	for i, p := range parts {
		v[i] = changevector.Entry{Tag: p.Tag, Etag: p.Etag, DBID: p.DB}
	}
	return v.String()
}

// docOf is the stored spelling and collection of a document ("" when it
// is missing), for a change of its counters or series.
func (tx *Tx) docOf(docKey, id string) (string, string, error) {
	e, err := tx.lookup(docKey)
	if err != nil || e == nil {
		return id, "", err
	}
	return e.id, e.collection, nil
}

// noteCounter records a counter change.
func (tx *Tx) noteCounter(typ string, c Counter, collection string) {
	value := c.Total
	if typ == "Delete" {
		value = 0
	}
	tx.items = append(tx.items, ItemChange{Kind: KindCounters, Type: typ, DocID: c.DocID, Collection: collection,
		Name: c.Name, ChangeVector: counterCV(c.Parts), Value: value})
}

// noteSeries records a time-series change: entries appended in [from, to]
// ("Put") or a range deleted ("Delete"), the last at etag. A Put right after
// a Put of the same series in the same request widens it instead (a
// replicated batch of entries is one notification per series, not one per
// entry).
func (tx *Tx) noteSeries(typ, docID, collection, name string, from, to, etag int64) {
	if typ == "Put" && len(tx.items) > tx.itemsMark {
		last := &tx.items[len(tx.items)-1]
		if last.Kind == KindTimeSeries && last.Type == "Put" && strings.EqualFold(last.DocID, docID) && strings.EqualFold(last.Name, name) {
			last.From, last.To = min(last.From, from), max(last.To, to)
			last.ChangeVector = tx.localCV(etag)
			return
		}
	}
	tx.items = append(tx.items, ItemChange{Kind: KindTimeSeries, Type: typ, DocID: docID, Collection: collection,
		Name: name, ChangeVector: tx.localCV(etag), From: from, To: to})
}
