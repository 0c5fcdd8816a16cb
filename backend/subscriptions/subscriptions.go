// Package subscriptions holds data subscriptions' definitions: a query over
// a collection and a starting point, kept in the cluster state so every node
// sees the same ones. (Workers, delivery and monitoring build on it.)
package subscriptions

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/rql"
)

// Starting points other than a concrete change vector.
const (
	BeginningOfTime = "BeginningOfTime"
	LastDocument    = "LastDocument"
	DoNotChange     = "DoNotChange" // updates only: keep the position
)

// Definition is what the cluster state keeps of a subscription.
type Definition struct {
	Query      string
	Collection string // from the query
	// Start is where delivery began: BeginningOfTime or a change vector
	// (LastDocument is resolved to the collection's last document when the
	// subscription is created). The progress lives beside the definition.
	Start                          string
	Disabled                       bool   `json:",omitempty"`
	MentorNode                     string `json:",omitempty"`
	PinToMentorNode                bool   `json:",omitempty"`
	ArchivedDataProcessingBehavior string `json:",omitempty"`
	Created                        time.Time
}

// Options is the body of a create or update request
// (SubscriptionCreationOptions, PascalCase as the clients send it).
type Options struct {
	Name                           string
	Query                          string
	ChangeVector                   *string
	MentorNode                     string
	PinToMentorNode                *bool // nil: unchanged by an update
	Disabled                       *bool // nil: unchanged by an update
	ArchivedDataProcessingBehavior string
	ID                             *int64 `json:"Id"` // updates may name the subscription by id
}

// Check parses the query (it must be a collection query) and returns the
// collection, or a 400 saying where the query is wrong.
func Check(query string) (string, error) {
	if strings.TrimSpace(query) == "" {
		return "", dberr.New(dberr.BadRequest, "A subscription needs a query, e.g. from Orders")
	}
	q, err := rql.Parse(query)
	if err != nil {
		return "", dberr.New(dberr.BadRequest, "Subscription query: %v", err)
	}
	if q.Collection == "" {
		return "", dberr.New(dberr.BadRequest, "A subscription queries a collection, not an index: %s", query)
	}
	return q.Collection, nil
}

// FromOptions builds a new definition.
func FromOptions(o Options, now time.Time) (Definition, error) {
	coll, err := Check(o.Query)
	if err != nil {
		return Definition{}, err
	}
	start := BeginningOfTime
	if o.ChangeVector != nil && *o.ChangeVector != "" {
		start = *o.ChangeVector
	}
	if start == DoNotChange {
		return Definition{}, dberr.New(dberr.BadRequest, "DoNotChange is only for updates")
	}
	return Definition{Query: o.Query, Collection: coll, Start: start, Disabled: o.Disabled != nil && *o.Disabled, MentorNode: o.MentorNode,
		PinToMentorNode: o.PinToMentorNode != nil && *o.PinToMentorNode, ArchivedDataProcessingBehavior: o.ArchivedDataProcessingBehavior, Created: now.UTC()}, nil
}

// Update applies an update request to a definition: a new query, a new
// starting point (which resets the position) unless DoNotChange or absent,
// and the flags that were sent (a partial update keeps the others).
func (d Definition) Update(o Options) (Definition, error) {
	if o.Query != "" && o.Query != d.Query {
		coll, err := Check(o.Query)
		if err != nil {
			return d, err
		}
		d.Query, d.Collection = o.Query, coll
	}
	if o.ChangeVector != nil && *o.ChangeVector != DoNotChange && *o.ChangeVector != "" {
		d.Start = *o.ChangeVector
	}
	if o.Disabled != nil {
		d.Disabled = *o.Disabled
	}
	if o.MentorNode != "" {
		d.MentorNode = o.MentorNode
	}
	if o.PinToMentorNode != nil {
		d.PinToMentorNode = *o.PinToMentorNode
	}
	return d, nil
}

// Parse reads a stored definition.
func Parse(raw json.RawMessage) (Definition, error) {
	var d Definition
	err := json.Unmarshal(raw, &d)
	return d, err
}

// State is a subscription as RavenDB's clients read it (SubscriptionState).
type State struct {
	SubscriptionId                        int64
	SubscriptionName                      string
	ChangeVectorForNextBatchStartingPoint *string
	ShardingState                         any
	Query                                 string
	Disabled                              bool
	LastClientConnectionTime              *time.Time
	LastBatchAckTime                      *time.Time
	MentorNode                            *string
	PinToMentorNode                       bool
	ArchivedDataProcessingBehavior        string
}

// StateOf renders a definition and its progress for the clients;
// lastConnection is the last time a worker connected (nil: never).
func StateOf(id int64, name string, d Definition, p Progress, lastConnection *time.Time) State {
	s := State{SubscriptionId: id, SubscriptionName: name, Query: d.Query, Disabled: d.Disabled,
		LastClientConnectionTime: lastConnection, LastBatchAckTime: p.AckAt,
		PinToMentorNode: d.PinToMentorNode, ArchivedDataProcessingBehavior: d.ArchivedDataProcessingBehavior}
	if s.ArchivedDataProcessingBehavior == "" {
		s.ArchivedDataProcessingBehavior = "ExcludeArchived"
	}
	if p.Vector != "" {
		v := p.Vector
		s.ChangeVectorForNextBatchStartingPoint = &v
	}
	if d.MentorNode != "" {
		m := d.MentorNode
		s.MentorNode = &m
	}
	return s
}
