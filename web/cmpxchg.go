package web

import (
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/clustertx"
	"github.com/rookerydb/rookery/backend/query"
)

// clusterTxApplier makes the applier that writes committed cluster
// transactions into this node's databases (started by watch).
func (s *Server) clusterTxApplier() *clustertx.Applier {
	s.clusterTx = clustertx.New(s.cluster, s.catalog, s.log)
	return s.clusterTx
}

// queryCmpXchg reads a compare-exchange value for a query's include
// cmpxchg(), from this node's copy of the cluster state (as GET /cmpxchg
// does). A string that cannot be a key has no value.
func (s *Server) queryCmpXchg(db, key string) (query.CmpXchgValue, bool) {
	if s.cluster == nil || cluster.ValidCmpXchgKey(key) != nil {
		return query.CmpXchgValue{}, false
	}
	v, ok := s.cluster.CmpXchg(db, key)
	if !ok {
		return query.CmpXchgValue{}, false
	}
	return query.CmpXchgValue{Key: v.Key, Index: v.Index, Value: v.Value}, true
}
