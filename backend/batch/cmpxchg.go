package batch

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Compare-exchange commands of a cluster-wide batch.
const (
	CmpXchgPut    = "CompareExchangePUT"
	CmpXchgDelete = "CompareExchangeDELETE"
)

func readIndex(dec *jsontext.Decoder, i int) (int64, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return 0, bad(dec, err)
	}
	if tok.Kind() == 'n' {
		return 0, nil
	}
	if tok.Kind() != '0' {
		return 0, badf(dec.InputOffset(), "command %d: Index must be a number", i)
	}
	v, err := tok.Float()
	if err != nil || v < 0 || v > 1<<62 || v != float64(int64(v)) {
		return 0, badf(dec.InputOffset(), "command %d: Index must be a non-negative integer", i)
	}
	return int64(v), nil
}

func checkCmpXchg(c Command, i int) error {
	if strings.TrimSpace(c.ID) == "" {
		return dberr.New(dberr.BadRequest, "command %d: %s requires an Id (the key)", i, c.Type)
	}
	if c.Type == CmpXchgPut && !c.hasDocument {
		return dberr.New(dberr.BadRequest, "command %d: %s requires a Document", i, c.Type)
	}
	return nil
}

// checkMode refuses compare-exchange commands outside a cluster-wide batch.
func checkMode(cmds []Command, clusterWide bool) error {
	if clusterWide {
		return nil
	}
	for i, c := range cmds {
		if c.Type == CmpXchgPut || c.Type == CmpXchgDelete {
			return dberr.New(dberr.BadRequest, "command %d: %s is only allowed in a cluster-wide transaction (TransactionMode ClusterWide)", i, c.Type)
		}
	}
	return nil
}
