package query

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// includeCounters answers include counters(...): for every document of
// the page, its counters (all, or the named ones, null for a missing one)
// as CounterIncludes, and the names asked for as IncludedCounterNames.
func (e *exec) includeCounters(ctx context.Context) error {
	names := e.q.Counters.Names
	if e.q.Counters.All {
		names = nil
	}
	buf := []byte{'{'}
	e.res.IncludedCounterNames = map[string][]string{}
	seen := map[string]bool{}
	n := 0
	for _, id := range e.counterIDs {
		key := strings.ToLower(id)
		if seen[key] {
			continue
		}
		seen[key] = true
		cs, err := e.db.Counters(ctx, id, names)
		if err != nil {
			return err
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		buf = document.AppendString(buf, id)
		buf = append(buf, ":["...)
		for i, c := range cs {
			if i > 0 {
				buf = append(buf, ',')
			}
			if c == nil {
				buf = append(buf, "null"...)
				continue
			}
			buf = append(buf, `{"DocumentId":`...)
			buf = document.AppendString(buf, c.DocID)
			buf = append(buf, `,"CounterName":`...)
			buf = document.AppendString(buf, c.Name)
			buf = append(buf, `,"TotalValue":`...)
			buf = strconv.AppendInt(buf, c.Total, 10)
			buf = append(buf, `,"Etag":`...)
			buf = strconv.AppendInt(buf, c.Etag, 10)
			buf = append(buf, `,"CounterValues":null}`...)
		}
		buf = append(buf, ']')
		e.res.IncludedCounterNames[id] = append([]string{}, names...)
	}
	e.res.CounterIncludes = append(buf, '}')
	return nil
}

// isCounterProjection tells a select's counter() and counterRaw() items.
func isCounterProjection(pr rql.Projection) bool {
	return pr.Func == "counter" || pr.Func == "counterRaw"
}

// counterProjections resolves the counter names of the select's counter()
// and counterRaw() items ($parameters to their strings), checks them as
// counter names and notes them, so render reads them for every result.
func (e *exec) counterProjections() error {
	for i := range e.q.Select {
		pr := &e.q.Select[i]
		if !isCounterProjection(*pr) {
			continue
		}
		v, ok := resolveValue(pr.Counter, e.params)
		if !ok {
			return &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("the query uses $%s, which has no value", pr.Counter.Param)}
		}
		name, isStr := v.(string)
		if !isStr {
			return &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("%s() takes a counter name as a string, not %v", pr.Func, v)}
		}
		if err := storage.ValidateCounterName(name); err != nil {
			return &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("%s(): %w", pr.Func, err)}
		}
		pr.Counter = rql.Value{Literal: name}
		e.counterNames = append(e.counterNames, name)
	}
	return nil
}

// projectCounters sets the counter() and counterRaw() items of a
// document's projection: the counter's total, or its value per database
// copy keyed as GET /counters?full=true keys them; null for a missing
// counter. All of them are read at once.
func (e *exec) projectCounters(ctx context.Context, docID string, out map[string]any) error {
	cs, err := e.db.Counters(ctx, docID, e.counterNames)
	if err != nil {
		return err
	}
	i := 0
	for _, pr := range e.q.Select {
		if !isCounterProjection(pr) {
			continue
		}
		c := cs[i]
		i++
		name := projectionName(pr)
		switch {
		case c == nil:
			out[name] = nil
		case pr.Func == "counter":
			out[name] = c.Total
		default:
			raw := map[string]int64{}
			for _, p := range c.Parts {
				if !p.Deleted {
					raw[p.ValueKey()] = p.Value
				}
			}
			out[name] = raw
		}
	}
	return nil
}
