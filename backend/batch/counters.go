package batch

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Counters is the command type of counter operations on one document.
const Counters = "Counters"

// MaxCounterOps bounds the operations of one Counters command.
const MaxCounterOps = 1 << 16

// CounterOps is the body of a Counters command (and one document of a
// CounterBatch): {DocumentId, Operations:[{Type, CounterName, Delta}]}.
type CounterOps struct {
	DocumentID string
	Operations []CounterOp
}

// CounterOp is one counter operation: "Increment", "Delete", "Get" or
// "GetAll".
type CounterOp struct {
	Type        string
	CounterName string
	Delta       int64
}

type rawCounterOps struct {
	DocumentId string
	Operations []struct {
		Type        string
		CounterName string
		Delta       *json.Number
	}
}

// ParseCounterOps checks one document's counter operations as a client
// sends them (raw is the JSON object).
func ParseCounterOps(raw []byte) (*CounterOps, error) {
	var r rawCounterOps
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, dberr.New(dberr.BadRequest, "Counters: %v", err)
	}
	if len(r.Operations) > MaxCounterOps {
		return nil, dberr.New(dberr.BadRequest, "Counters: more than %d operations", MaxCounterOps)
	}
	out := &CounterOps{DocumentID: r.DocumentId, Operations: make([]CounterOp, 0, len(r.Operations))}
	for j, o := range r.Operations {
		op := CounterOp{Type: o.Type, CounterName: o.CounterName}
		switch o.Type {
		case "Increment":
			op.Delta = 1
			if o.Delta != nil {
				d, err := o.Delta.Int64()
				if err != nil {
					f, ferr := o.Delta.Float64()
					if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
						return nil, dberr.New(dberr.BadRequest, "Counters: operation %d: Delta must be a 64-bit integer, got %s", j, o.Delta.String())
					}
					d = int64(f)
				}
				op.Delta = d
			}
			fallthrough
		case "Delete", "Get":
			if err := storage.ValidateCounterName(o.CounterName); err != nil {
				return nil, err
			}
		case "GetAll":
		case "":
			return nil, dberr.New(dberr.BadRequest, "Counters: operation %d has no Type", j)
		default:
			return nil, dberr.New(dberr.BadRequest, "Counters: operation %d: type '%s' is not supported (Increment, Delete, Get, GetAll)", j, o.Type)
		}
		out.Operations = append(out.Operations, op)
	}
	return out, nil
}

func readCounterOps(dec *jsontext.Decoder, i int) (*CounterOps, error) {
	if dec.PeekKind() != '{' {
		return nil, badf(dec.InputOffset(), "command %d: Counters must be an object", i)
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, bad(dec, err)
	}
	ops, err := ParseCounterOps(raw)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "command %d: %v", i, err)
	}
	return ops, nil
}

func checkCounterCommand(c *Command, idSeen bool, i int) error {
	if c.Counters == nil {
		return dberr.New(dberr.BadRequest, "command %d: Counters requires a Counters member", i)
	}
	if c.Counters.DocumentID == "" {
		c.Counters.DocumentID = c.ID
	}
	if !idSeen || strings.TrimSpace(c.ID) == "" {
		c.ID = c.Counters.DocumentID
	}
	if strings.TrimSpace(c.ID) == "" {
		return dberr.New(dberr.BadRequest, "command %d: Counters requires a document Id", i)
	}
	return nil
}

// execCounters runs one document's counter operations in the batch's
// transaction. The result lists the counters incremented or read, with
// their totals after the command.
func execCounters(tx *storage.Tx, c Command) (Result, error) {
	r := Result{Type: Counters, ID: c.ID}
	var err error
	r.Counters, err = ApplyCounterOps(tx, c.ID, c.Counters.Operations)
	if err != nil {
		return r, err
	}
	// The document itself is unchanged: no DocumentChangeVector.
	if len(r.Counters) > 0 {
		r.ID = r.Counters[0].DocID
	}
	return r, nil
}

// ApplyCounterOps applies operations to a document's counters and returns
// the counters they incremented or read (a missing one read is left out).
func ApplyCounterOps(tx *storage.Tx, docID string, ops []CounterOp) ([]storage.Counter, error) {
	var out []storage.Counter
	at := map[string]int{} // lower-cased name -> index in out
	note := func(c storage.Counter) {
		k := strings.ToLower(c.Name)
		if j, ok := at[k]; ok {
			out[j] = c
			return
		}
		at[k] = len(out)
		out = append(out, c)
	}
	for _, op := range ops {
		switch op.Type {
		case "Increment":
			c, err := tx.IncrementCounter(docID, op.CounterName, op.Delta)
			if err != nil {
				return nil, err
			}
			note(c)
		case "Delete":
			if _, err := tx.DeleteCounter(docID, op.CounterName); err != nil {
				return nil, err
			}
			if j, ok := at[strings.ToLower(op.CounterName)]; ok {
				out = append(out[:j], out[j+1:]...)
				delete(at, strings.ToLower(op.CounterName))
				for k, v := range at {
					if v > j {
						at[k] = v - 1
					}
				}
			}
		case "Get":
			c, err := tx.Counter(docID, op.CounterName)
			if err != nil {
				return nil, err
			}
			if c != nil {
				note(*c)
			}
		case "GetAll":
			cs, err := tx.AllCounters(docID)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				note(c)
			}
		}
	}
	return out, nil
}
