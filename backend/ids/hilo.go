// Package ids generates document ids on the server: HiLo ranges, identities
// that never overwrite an existing document, and the pieces of the id rules
// the batch executor needs.
package ids

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// HiLoCollection is the collection of HiLo documents.
const HiLoCollection = "@hilo"

// HiLoPrefix starts every HiLo document id.
const HiLoPrefix = "Raven/Hilo/"

// Range is a HiLo range handed to a client.
type Range struct {
	Prefix      string
	Low, High   int64
	LastSize    int64
	ServerTag   string
	LastRangeAt time.Time
}

const (
	minCapacity = 32
	maxCapacity = 1024 * 1024
)

// Capacity is the size of the next range, from the size of the previous one
// and when it was handed out: it doubles when ranges are asked for quickly
// (under 30 s apart), halves when slowly (over 60 s), and stays between 32
// and 1,048,576. A missing time gives max(32, lastSize).
func Capacity(lastSize int64, lastRangeAt time.Time, known bool, now time.Time) int64 {
	if lastSize < 0 {
		lastSize = 0
	}
	if !known {
		return max(minCapacity, lastSize)
	}
	since := now.Sub(lastRangeAt)
	switch {
	case since < 30*time.Second:
		return min(max(minCapacity, lastSize, 2*lastSize), maxCapacity)
	case since > 60*time.Second:
		return max(minCapacity, lastSize/2)
	default:
		return max(minCapacity, lastSize)
	}
}

// ParseRangeAt reads the client's lastRangeAt; ok is false when it is
// missing or unparsable.
func ParseRangeAt(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// HiLoTx is what the HiLo generator needs from a write transaction.
type HiLoTx interface {
	Get(id string) (*storage.Document, error)
	Put(id string, doc document.Parsed, expected *string) (storage.Info, error)
	Now() time.Time
	NodeTag() string
	Separator() string
}

func readMax(tx HiLoTx, tag string) (int64, bool, error) {
	d, err := tx.Get(HiLoPrefix + tag)
	if err != nil || d == nil {
		return 0, false, err
	}
	var v struct{ Max int64 }
	if err := json.Unmarshal(d.Body, &v); err != nil {
		return 0, true, dberr.New(dberr.Internal, "HiLo document %s%s is not readable: %v", HiLoPrefix, tag, err)
	}
	return v.Max, true, nil
}

func writeMax(tx HiLoTx, tag string, maxValue int64) error {
	body := make([]byte, 0, 64)
	body = append(body, `{"Max":`...)
	body = strconv.AppendInt(body, maxValue, 10)
	body = append(body, `,"@metadata":{"@collection":"@hilo"}}`...)
	_, err := tx.Put(HiLoPrefix+tag, document.Parsed{Body: body, Collection: HiLoCollection}, nil)
	return err
}

// NextRange reserves the next range for tag inside tx. sep is the identity
// parts separator the client asked for ("" for the database's).
func NextRange(tx HiLoTx, tag string, lastSize int64, lastRangeAt string, sep string, lastMax int64) (Range, error) {
	if tag == "" {
		return Range{}, dberr.New(dberr.BadRequest, "tag is required")
	}
	if sep == "" {
		sep = tx.Separator()
	}
	at, known := ParseRangeAt(lastRangeAt)
	capacity := Capacity(lastSize, at, known, tx.Now())
	cur, _, err := readMax(tx, tag)
	if err != nil {
		return Range{}, err
	}
	oldMax := max(cur, lastMax)
	if err := writeMax(tx, tag, oldMax+capacity); err != nil {
		return Range{}, err
	}
	return Range{
		Prefix:      tag + sep,
		Low:         oldMax + 1,
		High:        oldMax + capacity,
		LastSize:    capacity,
		ServerTag:   tx.NodeTag(),
		LastRangeAt: tx.Now(),
	}, nil
}

// ReturnRange gives back the unused end of a range: Max becomes last when
// the document still ends at end (nobody took a later range) and
// last <= Max. It reports whether anything changed.
func ReturnRange(tx HiLoTx, tag string, end, last int64) (bool, error) {
	cur, ok, err := readMax(tx, tag)
	if err != nil || !ok {
		return false, err
	}
	if cur != end || last > cur {
		return false, nil
	}
	return true, writeMax(tx, tag, last)
}
