package web

import "github.com/rookerydb/rookery/backend/clustertx"

// clusterTxApplier makes the applier that writes committed cluster
// transactions into this node's databases (started by watch).
func (s *Server) clusterTxApplier() *clustertx.Applier {
	s.clusterTx = clustertx.New(s.cluster, s.catalog, s.log)
	return s.clusterTx
}
