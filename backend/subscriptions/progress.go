package subscriptions

import (
	"encoding/json"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
)

// Progress is where a subscription's delivery stands. It lives in the
// cluster state next to the definition and moves by compare-and-set, once
// per acknowledged batch.
type Progress struct {
	// Vector is ChangeVectorForNextBatchStartingPoint: per database copy
	// that delivered, the etag its scan has passed ("A:1042-<dbid>").
	// Delivery on a copy resumes after its own entry; a copy with no entry
	// starts from the beginning (at least once, never skipping).
	Vector string `json:",omitempty"`
	// AckAt is the last acknowledgement (LastBatchAckTime).
	AckAt *time.Time `json:",omitempty"`
	// Batches and Docs count acknowledged batches and documents.
	Batches int64 `json:",omitempty"`
	Docs    int64 `json:",omitempty"`
	// Rewinds counts how often the starting point was moved back.
	Rewinds int `json:",omitempty"`
	// Node is the tag of the node whose delivery last moved the position
	// (the node serving the subscription's worker, as far as the cluster
	// state knows; "" before any delivery).
	Node string `json:",omitempty"`
}

// ParseProgress reads a stored progress (empty: nothing acknowledged).
func ParseProgress(raw json.RawMessage) Progress {
	var p Progress
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &p)
	}
	return p
}

// Raw encodes p for the cluster state.
func (p Progress) Raw() json.RawMessage {
	b, _ := json.Marshal(p)
	return b
}

// Etag is the etag of database copy dbid that delivery has passed.
func (p Progress) Etag(dbid string) int64 {
	if p.Vector == "" {
		return 0
	}
	v, err := changevector.ParseStored(p.Vector)
	if err != nil {
		return 0
	}
	return v.Get(dbid)
}

// Advanced returns p with copy dbid's scan moved to etag.
func (p Progress) Advanced(tag, dbid string, etag int64) Progress {
	v, _ := changevector.ParseStored(p.Vector)
	p.Vector = v.WithEntry(tag, etag, dbid).String()
	p.Node = tag
	return p
}

// InitialProgress is the progress of a subscription that starts at start
// (BeginningOfTime, or a change vector: LastDocument is resolved to one
// when the subscription is created).
func InitialProgress(start string, rewinds int) Progress {
	p := Progress{Rewinds: rewinds}
	if start != BeginningOfTime && start != LastDocument && start != "" {
		p.Vector = start
	}
	return p
}
