package query

import (
	"context"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/document"
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
