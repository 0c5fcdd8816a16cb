package smuggler

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// Time series in a dump. RavenDB writes its compressed segments (a header
// with "@size" followed by raw bytes); the reference does not describe that
// format, so Rookery writes its own items in RavenDB's "TimeSeries" section:
//
//	{"DocId":…,"Name":…,"Collection":…,"Entries":[{"Timestamp":…,"Tag":…,"Values":[…]},…]}
//
// at most tsExportChunk entries each. The import reads these items back;
// RavenDB's segments are counted and reported as not imported.

const tsExportChunk = 1000

type tsDumpEntry struct {
	Timestamp string
	Tag       *string `json:",omitempty"`
	Values    []float64
}

type tsDumpItem struct {
	DocID      string `json:"DocId"`
	Name       string
	Collection string
	Entries    []tsDumpEntry
}

func exportTimeSeries(ctx context.Context, db *storage.DB, o Options, dw *dump.Writer, res *Result) error {
	res.add(func() { start(&res.TimeSeries.Counts) })
	if err := dw.Begin("TimeSeries"); err != nil {
		return err
	}
	r, err := db.ReadTimeSeries(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	all, err := r.AllSeries()
	if err != nil {
		return err
	}
	for _, s := range all {
		if !o.wantsCollection(s.Collection) {
			continue
		}
		item := tsDumpItem{DocID: s.DocID, Name: s.Name, Collection: s.Collection}
		emit := func() error {
			if len(item.Entries) == 0 {
				return nil
			}
			raw, err := json.Marshal(item)
			if err != nil {
				return err
			}
			n := int64(len(item.Entries))
			item.Entries = item.Entries[:0]
			res.add(func() { res.TimeSeries.ReadCount += n })
			return dw.Item(raw)
		}
		err := r.Range(s.DocID, s.Name, storage.TSMin, storage.TSMax, 0, -1, func(e *storage.TSEntry) error {
			item.Entries = append(item.Entries, tsDumpEntry{Timestamp: storage.TSTime(e.Timestamp).Format(document.TimeFormat), Tag: e.Tag, Values: append([]float64(nil), e.Values...)})
			if len(item.Entries) >= tsExportChunk {
				return emit()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := emit(); err != nil {
			return err
		}
	}
	return dw.End()
}

// importTimeSeries stores one item of the TimeSeries section: Rookery's own
// entries (after the documents read so far are committed), or a RavenDB
// segment, counted and skipped.
func (imp *importer) importTimeSeries(it *dump.Item) error {
	r := imp.res
	if it.Kind == dump.KindTimeSeries {
		r.add(func() { r.TimeSeries.ReadCount++ })
		imp.notYet(it.Section, "RavenDB's compressed time-series segments")
		return nil
	}
	if !imp.o.Has(TypeTimeSeries) {
		return nil
	}
	var item tsDumpItem
	if err := json.Unmarshal(it.JSON, &item); err != nil {
		return err
	}
	if item.DocID == "" || item.Name == "" {
		return errors.New("a time-series item without DocId or Name")
	}
	op := storage.TSOp{Name: item.Name}
	for _, e := range item.Entries {
		ms, err := batch.ParseTSTime(e.Timestamp)
		if err != nil {
			return err
		}
		op.Appends = append(op.Appends, storage.TSAppend{Timestamp: ms, Values: e.Values, Tag: e.Tag})
	}
	if err := imp.flush(); err != nil {
		return err
	}
	if err := imp.wait(); err != nil {
		return err
	}
	err := imp.db.Write(imp.ctx, func(tx *storage.Tx) error { return tx.TimeSeries(item.DocID, op) })
	if err != nil {
		r.add(func() { r.TimeSeries.ErroredCount++ })
		imp.res.message("WARN", "time series %s of %s not imported: %v", item.Name, item.DocID, err)
		return nil
	}
	n := int64(len(item.Entries))
	r.add(func() { r.TimeSeries.ReadCount += n })
	return nil
}
