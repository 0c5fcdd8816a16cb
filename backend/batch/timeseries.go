package batch

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// TimeSeries is the command type of a time-series change
// (session.timeSeriesFor(...).append/delete).
const TimeSeries = "TimeSeries"

// TSBody is the JSON of a time-series operation, in a TimeSeries command
// and in POST /timeseries (TimeSeriesBatchOperation): appends sorted by
// the client, deletes as ranges with null for an open end.
type TSBody struct {
	Name    string
	Appends []struct {
		Timestamp string
		Values    []float64
		Tag       *string
	}
	Deletes []struct {
		From, To *string
	}
	Increments json.RawMessage
}

// ParseTSTime reads a time-series timestamp: RFC 3339 (RavenDB writes 7
// fractional digits and Z); without a zone it is UTC. Returns unix
// milliseconds.
func ParseTSTime(s string) (int64, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, dberr.New(dberr.BadRequest, "Could not parse the date-time '%s'", s)
}

// Op checks the body and converts it.
func (b *TSBody) Op() (storage.TSOp, error) {
	op := storage.TSOp{Name: b.Name}
	if err := storage.ValidateTSName(b.Name); err != nil {
		return op, err
	}
	if inc := strings.TrimSpace(string(b.Increments)); inc != "" && inc != "null" && inc != "[]" {
		return op, dberr.New(dberr.BadRequest, "Incremental time series are not supported by this server")
	}
	for _, a := range b.Appends {
		ts, err := ParseTSTime(a.Timestamp)
		if err != nil {
			return op, err
		}
		op.Appends = append(op.Appends, storage.TSAppend{Timestamp: ts, Values: a.Values, Tag: a.Tag})
	}
	for _, d := range b.Deletes {
		r := storage.TSDelete{From: storage.TSMin, To: storage.TSMax}
		var err error
		if d.From != nil && *d.From != "" {
			if r.From, err = ParseTSTime(*d.From); err != nil {
				return op, err
			}
		}
		if d.To != nil && *d.To != "" {
			if r.To, err = ParseTSTime(*d.To); err != nil {
				return op, err
			}
		}
		op.Deletes = append(op.Deletes, r)
	}
	return op, nil
}

func readTimeSeries(dec *jsontext.Decoder, i int) (*storage.TSOp, error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, bad(dec, err)
	}
	var b TSBody
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, badf(dec.InputOffset(), "command %d: TimeSeries: %v", i, err)
	}
	op, err := b.Op()
	if err != nil {
		return nil, err
	}
	return &op, nil
}

func checkTimeSeries(c Command, idSeen bool, i int) error {
	if !idSeen || strings.TrimSpace(c.ID) == "" {
		return dberr.New(dberr.BadRequest, "command %d: TimeSeries requires an Id", i)
	}
	if c.TimeSeries == nil {
		return dberr.New(dberr.BadRequest, "command %d: TimeSeries requires a TimeSeries object", i)
	}
	return nil
}
