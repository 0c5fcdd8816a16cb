package smuggler

import (
	"context"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
)

// ClusterServices are the node's real Services: identities and
// subscriptions in the cluster's state, index definitions through the
// indexes service.
type ClusterServices struct {
	Cluster *cluster.Cluster
	Indexes *indexes.Service
	Subs    *subscriptions.Manager
}

// Identities returns the database's identity counters ("prefix|" → value).
func (s ClusterServices) Identities(db string) map[string]int64 { return s.Cluster.Identities(db) }

// SeedIdentity moves an identity up to value (never down).
func (s ClusterServices) SeedIdentity(ctx context.Context, db, prefix string, value int64) error {
	_, err := s.Cluster.SeedIdentity(ctx, db, prefix, value, false)
	return err
}

// IndexDefinitions lists the database's index definitions.
func (s ClusterServices) IndexDefinitions(db string) []index.Definition { return s.Indexes.List(db) }

// PutIndex records a definition: an auto index as an auto index, the
// others as JavaScript indexes (checked as PUT /indexes checks them).
func (s ClusterServices) PutIndex(ctx context.Context, db string, d index.Definition) error {
	if d.IsAuto() {
		return s.Indexes.PutAuto(ctx, db, d, nil)
	}
	_, err := s.Indexes.Put(ctx, db, []index.Definition{d})
	return err
}

// Subscriptions lists the database's subscriptions with where delivery
// stands.
func (s ClusterServices) Subscriptions(db string) []Subscription {
	var out []Subscription
	for _, rec := range s.Cluster.Subscriptions(db) {
		def, err := subscriptions.Parse(rec.Data)
		if err != nil {
			continue
		}
		out = append(out, Subscription{Name: rec.Name, ID: rec.ID, Query: def.Query, Disabled: def.Disabled,
			MentorNode: def.MentorNode, PinToMentorNode: def.PinToMentorNode,
			ChangeVector: subscriptions.ParseProgress(rec.Progress).Vector})
	}
	return out
}

// CreateSubscription creates a subscription from a dump, starting where the
// dump's copy stood (its change vector) or from the beginning.
func (s ClusterServices) CreateSubscription(ctx context.Context, db *storage.DB, sub Subscription) error {
	o := subscriptions.Options{Name: sub.Name, Query: sub.Query, MentorNode: sub.MentorNode}
	if sub.Disabled {
		t := true
		o.Disabled = &t
	}
	if sub.PinToMentorNode {
		t := true
		o.PinToMentorNode = &t
	}
	if sub.ChangeVector != "" {
		cv := sub.ChangeVector
		o.ChangeVector = &cv
	}
	_, _, err := s.Subs.Create(ctx, db, o)
	return err
}
