package rql

// CounterInclude is include counters(...) of the results: every counter
// (All) or the named ones.
type CounterInclude struct {
	All   bool
	Names []string
}

// maxIncludedCounters bounds the names of one query's counters include.
const maxIncludedCounters = 1024

// includeCounters reads counters() or counters('a', 'b') after the include
// keyword (the parser stands on "counters"). A source path (counters of
// documents the results refer to) is refused.
func (p *parser) includeCounters(q *Query) error {
	p.next() // counters
	p.next() // (
	if q.Counters == nil {
		q.Counters = &CounterInclude{}
	}
	if p.punct(")") {
		q.Counters.All = true
		return nil
	}
	for {
		a := p.next()
		if a.kind != tString {
			return p.errAt(a, "include counters() takes counter names as strings (counters of other documents, by a path, are not supported)")
		}
		if len(q.Counters.Names) >= maxIncludedCounters {
			return p.errAt(a, "include counters() names more than %d counters", maxIncludedCounters)
		}
		q.Counters.Names = append(q.Counters.Names, a.text)
		if p.punct(",") {
			continue
		}
		if err := p.expectPunct(")"); err != nil {
			return err
		}
		return nil
	}
}
