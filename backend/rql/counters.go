package rql

import "strings"

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

// maxCounterProjections bounds the counter() and counterRaw() items of one
// select.
const maxCounterProjections = 1024

// counterProjection reads counter([alias,] name) or counterRaw([alias,]
// name) in a select (the parser stands on the function's name): a counter
// of the queried document, named by a string, a bare name or a $parameter.
// The first of two arguments must be the query's alias (counters of other
// documents are not supported). A grouped query's rows are not documents,
// so it takes neither.
func (p *parser) counterProjection(q *Query, pr *Projection) error {
	fn := p.next()
	p.next() // (
	name := "counter"
	if strings.EqualFold(fn.text, "counterRaw") {
		name = "counterRaw"
	}
	if len(q.GroupBy) > 0 {
		return p.errAt(fn, "%s() reads a document's counter; the rows of a group by query are not documents", name)
	}
	n := 0
	for _, s := range q.Select {
		if s.Func == "counter" || s.Func == "counterRaw" {
			n++
		}
	}
	if n >= maxCounterProjections {
		return p.errAt(fn, "the select has more than %d counter() and counterRaw() items", maxCounterProjections)
	}
	var args []token
	for {
		a := p.next()
		if a.kind != tString && a.kind != tIdent && a.kind != tParam {
			return p.errAt(a, "%s() takes the query's alias and a counter name (a string or a $parameter), found %s", name, a)
		}
		if len(args) == 2 {
			return p.errAt(a, "%s() takes at most two arguments: the query's alias and a counter name", name)
		}
		args = append(args, a)
		if p.punct(",") {
			continue
		}
		if err := p.expectPunct(")"); err != nil {
			return err
		}
		break
	}
	if len(args) == 2 {
		src := args[0]
		if src.kind != tIdent || q.Alias == "" || src.text != q.Alias {
			return p.errAt(src, "%s()'s first argument must be the query's alias (from Coll as x select %s(x, 'Name')); counters of other documents are not supported", name, name)
		}
	}
	c := args[len(args)-1]
	switch {
	case c.kind == tParam:
		pr.Counter = Value{Param: c.text}
	case c.kind == tIdent && isReserved(c.text):
		return p.errAt(c, "expected a counter name, found keyword %q", c.text)
	default:
		if c.text == "" {
			return p.errAt(c, "%s() takes a counter name, not an empty string", name)
		}
		pr.Counter = Value{Literal: c.text}
	}
	pr.Func = name
	return nil
}
