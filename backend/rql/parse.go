// Package rql parses and evaluates the subset of RavenDB's query language
// that clients generate for queries, patch by query and data subscriptions:
//
//	from <Collection>|@all_docs|index '<Name>' [as x] [group by a, b] [where …]
//	    [order by f [as long|double|alphaNumeric|string] [desc], score(), random()]
//	    [select [distinct] a, b as c, key(), count(), sum(f), counter([x,] 'n'), counterRaw([x,] 'n')]
//	    [include a, timings(), counters(['n', …]), cmpxchg(path)]
//	    [limit $skip, $take | limit n [offset m] | offset m] [update { script }]
//
// The where clause takes =, !=, <, <=, >, >=, between, in, all in,
// startsWith(), endsWith(), exists(), search() (with its and/or operator),
// regex(), exact(), boost(), fuzzy(), proximity(), true, and/or/not and
// parentheses, over nested paths (Address.City, Lines[].Price), id() and
// $parameters. boost(), fuzzy() and proximity() act as the expression they
// wrap (they change ranking, not matching). String comparisons ignore case,
// as RavenDB's default analyzer does, except inside exact(). Syntax errors
// carry the byte position.
package rql

import (
	"fmt"
	"strconv"
	"strings"
)

// SyntaxError is a query that does not parse.
type SyntaxError struct {
	Pos int // byte offset in the query
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("RQL syntax error at position %d: %s", e.Pos, e.Msg)
}

// Query is a parsed query.
type Query struct {
	Collection string // "" for an index query
	Index      string
	Alias      string
	GroupBy    []Path
	Where      Expr // nil: every document
	OrderBy    []Order
	Distinct   bool
	Select     []Projection
	Include    []Path
	Timings    bool // include timings()
	// Counters is include counters(...): nil when absent (counters.go).
	Counters *CounterInclude
	// CmpXchg are the paths of include cmpxchg(path): the results' values
	// there are compare-exchange keys (cmpxchg.go).
	CmpXchg    []Path
	Skip, Take *Value  // limit $skip, $take; nil when absent
	Update     *string // the script of update { … }, without its braces
}

// Path is a field reference: segments, where a segment ending in "[]"
// fans out over an array. ID is id().
type Path struct {
	Segments []string
	ID       bool
}

func (p Path) String() string {
	if p.ID {
		return "id()"
	}
	return strings.Join(p.Segments, ".")
}

// Value is a literal or a $parameter.
type Value struct {
	Param   string // without '$'; "" for a literal
	Literal any    // string, float64, bool or nil
}

// Order is one order by item: a field, score() or random().
type Order struct {
	Field  Path
	Random bool
	Score  bool
	As     string // long, double, alphaNumeric, string or ""
	Desc   bool
}

// Projection is one select item.
type Projection struct {
	Field Path // the field, or sum()'s argument
	// Func is "key", "count" or "sum" for key(), count(), sum(Field), and
	// "counter" or "counterRaw" for counter() and counterRaw() (counters.go).
	Func string
	As   string
	// Counter is the counter name of counter() and counterRaw(): a string
	// or a $parameter.
	Counter Value
}

// Expr is a where-clause expression.
type Expr interface{ expr() }

type (
	// And is both.
	And struct{ L, R Expr }
	// Or is either.
	Or struct{ L, R Expr }
	// Not negates.
	Not struct{ E Expr }
	// Compare is field op value; Exact turns off case folding.
	Compare struct {
		Field Path
		Op    string // = != < <= > >=
		Value Value
		Exact bool
	}
	// Between is field between lo and hi (inclusive).
	Between struct {
		Field  Path
		Lo, Hi Value
	}
	// In is field [all] in (values); an array parameter expands.
	In struct {
		Field  Path
		Values []Value
		All    bool
	}
	// Call is startsWith, endsWith, search, regex or lucene. Operator is
	// search()'s third argument: "and" (every term) or "or" (any term, the
	// default, also when "").
	Call struct {
		Name     string
		Field    Path
		Value    Value
		Operator string
	}
	// Exists is exists(field).
	Exists struct{ Field Path }
	// True matches every document (the client writes "true and not …").
	True struct{}
)

func (And) expr()     {}
func (Or) expr()      {}
func (Not) expr()     {}
func (Compare) expr() {}
func (Between) expr() {}
func (In) expr()      {}
func (Call) expr()    {}
func (Exists) expr()  {}
func (True) expr()    {}

// Parse parses a query within the limits set by SetLimits (DefaultLimits
// until then): a longer query is refused before it is read, a deeper one
// where the nesting passes the limit, both as a positioned SyntaxError.
func Parse(text string) (*Query, error) {
	lim := CurrentLimits()
	if len(text) > lim.MaxLength {
		return nil, &SyntaxError{Pos: lim.MaxLength, Msg: fmt.Sprintf("the query is %d bytes long, more than the %d bytes a query may have (the limit is set by --max-query-length)", len(text), lim.MaxLength)}
	}
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, n: len(text), maxDepth: lim.MaxDepth}
	q, err := p.query()
	if err != nil {
		return nil, err
	}
	return q, nil
}

type parser struct {
	toks []token
	i    int
	n    int
	// depth is how many parentheses, not, exact(), boost(), fuzzy() and
	// proximity() enclose the
	// term being read; maxDepth bounds it, and with it the recursion.
	depth, maxDepth int
}

// enter opens one level of nesting at t, or refuses it past the limit.
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.errAt(t, "the where clause nests deeper than %d levels (parentheses, not, exact(), boost(), fuzzy() and proximity() each count; the limit is set by --max-query-depth)", p.maxDepth)
	}
	return nil
}

func (p *parser) peek() token {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return token{kind: tEOF, pos: p.n}
}

func (p *parser) next() token {
	t := p.peek()
	if p.i < len(p.toks) {
		p.i++
	}
	return t
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf(format, args...)}
}

// kw reports (and consumes) a keyword.
func (p *parser) kw(word string) bool {
	t := p.peek()
	if t.kind == tIdent && strings.EqualFold(t.text, word) {
		p.i++
		return true
	}
	return false
}

func (p *parser) isKw(word string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.text, word)
}

func (p *parser) punct(s string) bool {
	t := p.peek()
	if t.kind == tPunct && t.text == s {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectPunct(s string) error {
	if !p.punct(s) {
		t := p.peek()
		return p.errAt(t, "expected %q, found %s", s, t)
	}
	return nil
}

func (p *parser) query() (*Query, error) {
	q := &Query{}
	if !p.kw("from") {
		return nil, p.errAt(p.peek(), "a query starts with 'from', found %s", p.peek())
	}
	if p.kw("index") {
		t := p.next()
		if t.kind != tString && t.kind != tIdent {
			return nil, p.errAt(t, "expected an index name, found %s", t)
		}
		q.Index = t.text
	} else {
		t := p.next()
		if t.kind != tString && t.kind != tIdent {
			return nil, p.errAt(t, "expected a collection name, found %s", t)
		}
		if t.kind == tIdent && isReserved(t.text) {
			return nil, p.errAt(t, "expected a collection name, found keyword %q", t.text)
		}
		q.Collection = t.text
	}
	if p.kw("as") {
		t := p.next()
		if t.kind != tIdent || isReserved(t.text) {
			return nil, p.errAt(t, "expected an alias, found %s", t)
		}
		q.Alias = t.text
	}
	if p.isKw("group") {
		p.next()
		if !p.kw("by") {
			return nil, p.errAt(p.peek(), "expected 'by' after 'group'")
		}
		for {
			f, err := p.field(q)
			if err != nil {
				return nil, err
			}
			q.GroupBy = append(q.GroupBy, f)
			if !p.punct(",") {
				break
			}
		}
	}
	if p.kw("where") {
		e, err := p.or(q)
		if err != nil {
			return nil, err
		}
		q.Where = e
	}
	if p.isKw("order") {
		p.next()
		if !p.kw("by") {
			return nil, p.errAt(p.peek(), "expected 'by' after 'order'")
		}
		for {
			o, err := p.orderItem(q)
			if err != nil {
				return nil, err
			}
			q.OrderBy = append(q.OrderBy, o)
			if !p.punct(",") {
				break
			}
		}
	}
	if p.kw("select") {
		q.Distinct = p.kw("distinct")
		for {
			pr, err := p.projection(q)
			if err != nil {
				return nil, err
			}
			q.Select = append(q.Select, pr)
			if !p.punct(",") {
				break
			}
		}
	}
	if p.kw("include") {
		for {
			if err := p.include(q); err != nil {
				return nil, err
			}
			if !p.punct(",") {
				break
			}
		}
	}
	if err := p.limit(q); err != nil {
		return nil, err
	}
	if t := p.peek(); p.kw("update") {
		s := p.next()
		if s.kind != tScript {
			return nil, p.errAt(t, "expected '{' after 'update'")
		}
		q.Update = &s.text
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t, "unexpected %s", t)
	}
	return q, nil
}

// include reads one include item: timings() or a path holding ids.
func (p *parser) include(q *Query) error {
	t := p.peek()
	if t.kind == tIdent && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" && !strings.EqualFold(t.text, "id") {
		if strings.EqualFold(t.text, "counters") {
			return p.includeCounters(q)
		}
		if strings.EqualFold(t.text, "cmpxchg") {
			return p.includeCmpXchg(q)
		}
		if !strings.EqualFold(t.text, "timings") {
			return p.errAt(t, "include %s() is not supported (include takes paths holding document ids, timings(), counters() and cmpxchg())", t.text)
		}
		p.i += 2
		if err := p.expectPunct(")"); err != nil {
			return err
		}
		q.Timings = true
		return nil
	}
	f, err := p.field(q)
	if err != nil {
		return err
	}
	q.Include = append(q.Include, f)
	return nil
}

// limit reads "limit skip, take", "limit take [offset skip]" and
// "offset skip [limit take]".
func (p *parser) limit(q *Query) error {
	seenLimit, seenOffset := false, false
	for {
		t := p.peek()
		switch {
		case p.kw("limit"):
			if seenLimit {
				return p.errAt(t, "limit given twice")
			}
			seenLimit = true
			a, err := p.value()
			if err != nil {
				return err
			}
			if p.punct(",") {
				if seenOffset {
					return p.errAt(t, "limit skip, take after offset")
				}
				seenOffset = true
				b, err := p.value()
				if err != nil {
					return err
				}
				q.Skip, q.Take = &a, &b
			} else {
				q.Take = &a // "limit n" takes n
			}
		case p.kw("offset"):
			if seenOffset {
				return p.errAt(t, "offset given twice")
			}
			seenOffset = true
			a, err := p.value()
			if err != nil {
				return err
			}
			q.Skip = &a
		default:
			return nil
		}
	}
}

func (p *parser) orderItem(q *Query) (Order, error) {
	var o Order
	if p.isKw("random") && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" {
		p.i++
		if err := p.expectPunct("("); err != nil {
			return o, err
		}
		o.Random = true
		if t := p.peek(); t.kind != tPunct || t.text != ")" { // random('seed')
			if _, err := p.value(); err != nil {
				return o, err
			}
		}
		if err := p.expectPunct(")"); err != nil {
			return o, err
		}
	} else if p.isKw("score") && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" {
		p.i += 2
		if err := p.expectPunct(")"); err != nil {
			return o, err
		}
		o.Score = true
	} else {
		f, err := p.field(q)
		if err != nil {
			return o, err
		}
		o.Field = f
	}
	if p.kw("as") {
		t := p.next()
		switch strings.ToLower(t.text) {
		case "long", "double", "alphanumeric", "string":
			o.As = t.text
		default:
			return o, p.errAt(t, "order by … as takes long, double, alphaNumeric or string, not %s", t)
		}
	}
	if p.kw("desc") || p.kw("descending") {
		o.Desc = true
	} else if p.kw("asc") || p.kw("ascending") {
		o.Desc = false
	}
	return o, nil
}

func (p *parser) projection(q *Query) (Projection, error) {
	var pr Projection
	t := p.peek()
	fn := strings.ToLower(t.text)
	if t.kind == tIdent && (fn == "counter" || fn == "counterraw") && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" {
		if err := p.counterProjection(q, &pr); err != nil {
			return pr, err
		}
	} else if t.kind == tIdent && (fn == "key" || fn == "count" || fn == "sum") && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" {
		p.i += 2
		if fn == "sum" {
			f, err := p.field(q)
			if err != nil {
				return pr, err
			}
			if f.ID {
				return pr, p.errAt(t, "sum() takes a field, not id()")
			}
			pr.Field = f
		}
		if err := p.expectPunct(")"); err != nil {
			return pr, err
		}
		pr.Func = fn
	} else {
		f, err := p.field(q)
		if err != nil {
			return pr, err
		}
		pr.Field = f
	}
	if p.kw("as") {
		a := p.next()
		if a.kind != tIdent && a.kind != tString {
			return pr, p.errAt(a, "expected a name after 'as', found %s", a)
		}
		pr.As = a.text
	}
	return pr, nil
}

// field reads a path: id(), a quoted name, or identifiers joined by dots,
// each optionally followed by [] (an alias prefix is dropped).
func (p *parser) field(q *Query) (Path, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return Path{Segments: []string{t.text}}, nil
	case tIdent:
	default:
		return Path{}, p.errAt(t, "expected a field, found %s", t)
	}
	if strings.EqualFold(t.text, "id") && p.punct("(") {
		if err := p.expectPunct(")"); err != nil {
			return Path{}, err
		}
		return Path{ID: true}, nil
	}
	if isReserved(t.text) {
		return Path{}, p.errAt(t, "expected a field, found keyword %q", t.text)
	}
	segs := []string{t.text}
	for {
		if p.punct("[") {
			if err := p.expectPunct("]"); err != nil {
				return Path{}, err
			}
			segs[len(segs)-1] += "[]"
			continue
		}
		if !p.punct(".") {
			break
		}
		n := p.next()
		if n.kind != tIdent && n.kind != tString {
			return Path{}, p.errAt(n, "expected a name after '.', found %s", n)
		}
		segs = append(segs, n.text)
	}
	if q.Alias != "" && len(segs) > 1 && segs[0] == q.Alias {
		segs = segs[1:]
	}
	return Path{Segments: segs}, nil
}

func (p *parser) value() (Value, error) {
	t := p.next()
	switch t.kind {
	case tParam:
		return Value{Param: t.text}, nil
	case tString:
		return Value{Literal: t.text}, nil
	case tNumber:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Value{}, p.errAt(t, "bad number %q", t.text)
		}
		return Value{Literal: f}, nil
	case tIdent:
		switch strings.ToLower(t.text) {
		case "true":
			return Value{Literal: true}, nil
		case "false":
			return Value{Literal: false}, nil
		case "null":
			return Value{Literal: nil}, nil
		}
	}
	return Value{}, p.errAt(t, "expected a value ($param, string, number, true, false or null), found %s", t)
}

func (p *parser) or(q *Query) (Expr, error) {
	l, err := p.and(q)
	if err != nil {
		return nil, err
	}
	for p.kw("or") {
		r, err := p.and(q)
		if err != nil {
			return nil, err
		}
		l = Or{l, r}
	}
	return l, nil
}

func (p *parser) and(q *Query) (Expr, error) {
	l, err := p.term(q)
	if err != nil {
		return nil, err
	}
	for p.kw("and") {
		r, err := p.term(q)
		if err != nil {
			return nil, err
		}
		l = And{l, r}
	}
	return l, nil
}

var calls = map[string]string{"startswith": "startsWith", "endswith": "endsWith", "search": "search", "regex": "regex", "lucene": "lucene"}

func (p *parser) term(q *Query) (Expr, error) {
	t := p.peek()
	if p.kw("not") {
		if err := p.enter(t); err != nil {
			return nil, err
		}
		e, err := p.term(q)
		if err != nil {
			return nil, err
		}
		p.depth--
		return Not{e}, nil
	}
	if p.punct("(") {
		if err := p.enter(t); err != nil {
			return nil, err
		}
		e, err := p.or(q)
		if err != nil {
			return nil, err
		}
		p.depth--
		return e, p.expectPunct(")")
	}
	if t.kind == tIdent && strings.EqualFold(t.text, "true") && (p.i+1 >= len(p.toks) || p.toks[p.i+1].kind != tPunct || p.toks[p.i+1].text == ")") {
		p.i++
		return True{}, nil
	}
	if t.kind == tIdent && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "(" {
		name := strings.ToLower(t.text)
		if name == "exact" || name == "boost" || name == "fuzzy" || name == "proximity" {
			if err := p.enter(t); err != nil {
				return nil, err
			}
			defer func() { p.depth-- }()
		}
		switch {
		case calls[name] != "":
			p.i += 2
			f, err := p.field(q)
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct(","); err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			c := Call{Name: calls[name], Field: f, Value: v}
			if c.Name == "search" && p.punct(",") {
				op := p.next()
				if op.kind != tIdent || (!strings.EqualFold(op.text, "and") && !strings.EqualFold(op.text, "or")) {
					return nil, p.errAt(op, "search()'s third argument is and or or, not %s", op)
				}
				c.Operator = strings.ToLower(op.text)
			}
			return c, p.expectPunct(")")
		case name == "exists":
			p.i += 2
			f, err := p.field(q)
			if err != nil {
				return nil, err
			}
			return Exists{f}, p.expectPunct(")")
		case name == "exact":
			p.i += 2
			e, err := p.or(q)
			if err != nil {
				return nil, err
			}
			return exact(e), p.expectPunct(")")
		case name == "boost" || name == "fuzzy" || name == "proximity":
			p.i += 2
			e, err := p.or(q)
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct(","); err != nil {
				return nil, err
			}
			if _, err := p.value(); err != nil {
				return nil, err
			}
			return e, p.expectPunct(")") // ranking only: matching is the inner expression's
		}
	}
	f, err := p.field(q)
	if err != nil {
		return nil, err
	}
	switch {
	case p.kw("between"):
		lo, err := p.value()
		if err != nil {
			return nil, err
		}
		if !p.kw("and") {
			return nil, p.errAt(p.peek(), "expected 'and' in between")
		}
		hi, err := p.value()
		if err != nil {
			return nil, err
		}
		return Between{Field: f, Lo: lo, Hi: hi}, nil
	case p.isKw("in") || p.isKw("all"):
		all := p.kw("all")
		if !p.kw("in") {
			return nil, p.errAt(p.peek(), "expected 'in' after 'all'")
		}
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		var vals []Value
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
			if !p.punct(",") {
				break
			}
		}
		return In{Field: f, Values: vals, All: all}, p.expectPunct(")")
	}
	op := p.next()
	switch op.text {
	case "=", "==", "!=", "<>", "<", "<=", ">", ">=":
		if op.kind != tPunct {
			break
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		o := op.text
		if o == "==" {
			o = "="
		} else if o == "<>" {
			o = "!="
		}
		return Compare{Field: f, Op: o, Value: v}, nil
	}
	return nil, p.errAt(op, "expected a comparison after %s, found %s", f, op)
}

// exact marks every comparison inside e as case-sensitive.
func exact(e Expr) Expr {
	switch x := e.(type) {
	case Compare:
		x.Exact = true
		return x
	case And:
		return And{exact(x.L), exact(x.R)}
	case Or:
		return Or{exact(x.L), exact(x.R)}
	case Not:
		return Not{exact(x.E)}
	}
	return e
}

var reserved = map[string]bool{"from": true, "where": true, "and": true, "or": true, "not": true, "select": true, "include": true,
	"limit": true, "order": true, "group": true, "between": true, "in": true, "as": true}

func isReserved(s string) bool { return reserved[strings.ToLower(s)] }
