package smuggler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
)

// CmpXchgServices are the compare-exchange values a dump carries (kept by
// the cluster). A Services that does not implement it exports no
// CompareExchange section and counts imported values as not stored.
type CmpXchgServices interface {
	CmpXchgValues(db string) []cluster.CmpXchgValue
	ImportCmpXchg(ctx context.Context, db string, ops []cluster.CmpXchgOp) error
}

// CmpXchgValues lists the database's values. Atomic guards are left out:
// they belong to the cluster transactions that wrote this copy's
// documents, and an imported document starts without one.
func (s ClusterServices) CmpXchgValues(db string) []cluster.CmpXchgValue {
	return s.Cluster.CmpXchgList(db, "")
}

// ImportCmpXchg sets values (or, Delete, removes them) without comparing.
func (s ClusterServices) ImportCmpXchg(ctx context.Context, db string, ops []cluster.CmpXchgOp) error {
	return s.Cluster.ImportCmpXchg(ctx, db, ops)
}

// exportCmpXchg writes the CompareExchange section: {"Key","Value"} with
// the value as a JSON-encoded string of {"Object":…,"@metadata":…}, as
// RavenDB writes it.
func exportCmpXchg(svc Services, db string, dw *dump.Writer, res *Result) error {
	cs, ok := svc.(CmpXchgServices)
	if !ok {
		return nil
	}
	res.add(func() { start(&res.CompareExchange) })
	if err := dw.Begin("CompareExchange"); err != nil {
		return err
	}
	for _, v := range cs.CmpXchgValues(db) {
		raw, _ := json.Marshal(map[string]string{"Key": v.Key, "Value": string(v.Value)})
		if err := dw.Item(raw); err != nil {
			return err
		}
		res.add(func() { res.CompareExchange.ReadCount++ })
	}
	return dw.End()
}

// importCmpXchg stores one CompareExchange item (a value, given as a
// JSON-encoded string or as the object itself) or removes the key of a
// CompareExchangeTombstones item.
func (imp *importer) importCmpXchg(it *dump.Item) error {
	r := imp.res
	cs, ok := imp.svc.(CmpXchgServices)
	if !ok || !imp.o.Has(TypeCompareExchange) {
		r.add(func() { r.CompareExchange.ReadCount++ })
		if ok {
			return nil
		}
		imp.notYet(it.Section, "compare-exchange values")
		return nil
	}
	var kv struct {
		Key   string          `json:"Key"`
		Value json.RawMessage `json:"Value"`
	}
	if err := json.Unmarshal(it.JSON, &kv); err != nil {
		return err
	}
	if err := cluster.ValidCmpXchgKey(kv.Key); err != nil {
		return err
	}
	if strings.HasPrefix(strings.ToLower(kv.Key), cluster.AtomicGuardPrefix) {
		return nil // see CmpXchgValues
	}
	op := cluster.CmpXchgOp{Key: kv.Key}
	if it.Section == "CompareExchangeTombstones" {
		op.Delete = true
	} else {
		v := kv.Value
		var s string
		if len(v) > 0 && v[0] == '"' {
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			v = json.RawMessage(s)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(v)), "{") || !json.Valid(v) {
			return fmt.Errorf("compare exchange value %q is not a JSON object", kv.Key)
		}
		if !strings.Contains(string(v), `"Object"`) {
			v = json.RawMessage(`{"Object":` + string(v) + `}`)
		}
		op.Value = v
	}
	if err := cs.ImportCmpXchg(imp.ctx, imp.db.Name(), []cluster.CmpXchgOp{op}); err != nil {
		r.add(func() { r.CompareExchange.ErroredCount++ })
		imp.res.message("WARN", "compare exchange value %s not imported: %v", kv.Key, err)
		return nil
	}
	r.add(func() { r.CompareExchange.ReadCount++ })
	return nil
}
