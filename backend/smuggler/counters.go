package smuggler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// Counters in a dump: the CounterGroups section, one item per document,
// {"DocId","ChangeVector","Values":{"Counters":{name:{part:value}}}}, where
// each part is one database copy's raw value, keyed "TAG:ETAG-DBID" as
// GetCountersOperation's full values are. The import also takes a part
// keyed by anything else (a node tag, a database id: RavenDB's own dumps)
// and the legacy Counters items {"DocId","Name","Value"}.

// exportCounters writes the CounterGroups section.
func exportCounters(ctx context.Context, db *storage.DB, o Options, dw *dump.Writer, res *Result) error {
	res.add(func() { start(&res.Counters.Counts) })
	if err := dw.Begin(TypeCounterGroups); err != nil {
		return err
	}
	var doc string
	var names []string
	values := map[string]map[string]int64{}
	flush := func() error {
		if doc == "" {
			return nil
		}
		group := map[string]any{"DocId": doc, "ChangeVector": "", "Values": map[string]any{"Counters": values}}
		raw, err := json.Marshal(group)
		if err != nil {
			return err
		}
		n := int64(len(names))
		res.add(func() { res.Counters.ReadCount += n })
		return dw.Item(raw)
	}
	err := db.ScanCounters(ctx, func(c *storage.Counter) error {
		if !strings.EqualFold(c.DocID, doc) {
			if err := flush(); err != nil {
				return err
			}
			doc, names, values = c.DocID, nil, map[string]map[string]int64{}
		}
		names = append(names, c.Name)
		parts := map[string]int64{}
		for _, p := range c.Parts {
			if !p.Deleted {
				parts[p.Tag+":"+strconv.FormatInt(p.Etag, 10)+"-"+p.DB] = p.Value
			}
		}
		values[c.Name] = parts
		return nil
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return dw.End()
}

// maxCountersPerGroup bounds the counters of one imported CounterGroups item.
const maxCountersPerGroup = 1 << 14

// importCounters stores one CounterGroups (or legacy Counters) item. The
// documents read before it are written first.
func (imp *importer) importCounters(section string, raw []byte) error {
	var g struct {
		DocID  string `json:"DocId"`
		Name   string
		Value  *int64
		Values struct {
			Counters map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return fmt.Errorf("%s item: %w", section, err)
	}
	if g.DocID == "" {
		return errors.New(section + " item without DocId")
	}
	type counter struct {
		name  string
		parts []storage.CounterPart
	}
	var cs []counter
	if g.Name != "" && g.Value != nil { // legacy item
		cs = append(cs, counter{g.Name, []storage.CounterPart{{DB: "import", Tag: "import", Value: *g.Value, Etag: 1}}})
	}
	if len(g.Values.Counters) > maxCountersPerGroup {
		return fmt.Errorf("%s item of %s: %d counters, the limit is %d", section, g.DocID, len(g.Values.Counters), maxCountersPerGroup)
	}
	for name, v := range g.Values.Counters {
		var vals map[string]json.Number
		if err := json.Unmarshal(v, &vals); err != nil {
			// A bare number is the counter's total.
			var n int64
			if err2 := json.Unmarshal(v, &n); err2 != nil {
				return fmt.Errorf("counter %s of %s: %w", name, g.DocID, err)
			}
			vals = map[string]json.Number{"import": json.Number(strconv.FormatInt(n, 10))}
		}
		c := counter{name: name}
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n, err := vals[k].Int64()
			if err != nil {
				return fmt.Errorf("counter %s of %s: %w", name, g.DocID, err)
			}
			c.parts = append(c.parts, partFromKey(k, n))
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil
	}
	// The documents first: their batch may still be pending.
	if err := imp.flush(); err != nil {
		return err
	}
	if err := imp.wait(); err != nil {
		return err
	}
	err := imp.db.Write(imp.ctx, func(tx *storage.Tx) error {
		for _, c := range cs {
			if err := tx.PutCounterParts(g.DocID, c.name, c.parts); err != nil {
				return fmt.Errorf("counter %s of %s: %w", c.name, g.DocID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := int64(len(cs))
	imp.res.add(func() { imp.res.Counters.ReadCount += n })
	return nil
}

// partFromKey reads a part key: "TAG:ETAG-DBID", else the key names the copy.
func partFromKey(k string, v int64) storage.CounterPart {
	if tag, rest, ok := strings.Cut(k, ":"); ok {
		if e, db, ok := strings.Cut(rest, "-"); ok {
			if etag, err := strconv.ParseInt(e, 10, 64); err == nil && db != "" && tag != "" {
				return storage.CounterPart{DB: db, Tag: tag, Value: v, Etag: etag}
			}
		}
	}
	return storage.CounterPart{DB: k, Tag: k, Value: v, Etag: 1}
}
