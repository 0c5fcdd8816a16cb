package rql

import "strings"

// maxIncludedCmpXchg bounds the cmpxchg() items of one query's include.
const maxIncludedCmpXchg = 1024

// includeCmpXchg reads cmpxchg(path) after the include keyword (the parser
// stands on "cmpxchg"): the compare-exchange values whose keys the results
// hold at path. The npm client quotes the path (cmpxchg('Address.Key')):
// a quoted path is split at its dots as a written one is. An alias prefix
// is dropped.
func (p *parser) includeCmpXchg(q *Query) error {
	t := p.next() // cmpxchg
	p.next()      // (
	if len(q.CmpXchg) >= maxIncludedCmpXchg {
		return p.errAt(t, "include names more than %d cmpxchg() paths", maxIncludedCmpXchg)
	}
	a := p.peek()
	var path Path
	if a.kind == tString {
		p.next()
		if a.text == "" {
			return p.errAt(a, "include cmpxchg() takes a path, not an empty string")
		}
		path = Path{Segments: strings.Split(a.text, ".")}
		for _, s := range path.Segments {
			if strings.TrimSuffix(s, "[]") == "" {
				return p.errAt(a, "include cmpxchg(%q): the path has an empty part", a.text)
			}
		}
		if q.Alias != "" && len(path.Segments) > 1 && path.Segments[0] == q.Alias {
			path.Segments = path.Segments[1:]
		}
	} else {
		f, err := p.field(q)
		if err != nil {
			return err
		}
		if f.ID {
			return p.errAt(a, "include cmpxchg() takes a path holding compare-exchange keys, not id()")
		}
		path = f
	}
	q.CmpXchg = append(q.CmpXchg, path)
	return p.expectPunct(")")
}
