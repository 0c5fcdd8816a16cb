package rql

import (
	"fmt"
	"regexp"
	"strings"
)

// Doc is a document to match: its id and its JSON decoded into
// map[string]any (numbers as float64).
type Doc struct {
	ID   string
	Body map[string]any
}

// Match tells whether doc satisfies the query's where clause. A field that
// fans out over an array matches when any of its values does (all in needs
// every listed value among them). params holds the $parameters.
func (q *Query) Match(doc Doc, params map[string]any) (bool, error) {
	if q.Where == nil {
		return true, nil
	}
	return eval(q.Where, doc, params)
}

func resolve(v Value, params map[string]any) (any, error) {
	if v.Param == "" {
		return v.Literal, nil
	}
	x, ok := params[v.Param]
	if !ok {
		return nil, fmt.Errorf("the query uses $%s, which has no value", v.Param)
	}
	return normalize(x), nil
}

// normalize turns integers into float64, as decoded JSON has them.
func normalize(x any) any {
	switch n := x.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case int32:
		return float64(n)
	case float32:
		return float64(n)
	}
	return x
}

// values returns the values at a path (several when it fans out over an
// array; none when it is missing).
func values(p Path, doc Doc) []any {
	if p.ID {
		return []any{doc.ID}
	}
	cur := []any{any(doc.Body)}
	for _, seg := range p.Segments {
		fan := strings.HasSuffix(seg, "[]")
		name := strings.TrimSuffix(seg, "[]")
		var next []any
		for _, c := range cur {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			v, ok := m[name]
			if !ok {
				continue
			}
			if arr, isArr := v.([]any); isArr && fan {
				next = append(next, arr...)
			} else {
				next = append(next, v)
			}
		}
		cur = next
	}
	// A plain path ending on an array compares with its elements, as
	// RavenDB indexes a collection field.
	var out []any
	for _, c := range cur {
		if arr, ok := c.([]any); ok {
			out = append(out, arr...)
		} else {
			out = append(out, c)
		}
	}
	return out
}

// compare orders two scalars: -2 when they cannot be compared.
func compare(a, b any, exact bool) int {
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 0
		}
		return -2
	case float64:
		if y, ok := b.(float64); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	case string:
		if y, ok := b.(string); ok {
			if !exact {
				x, y = strings.ToLower(x), strings.ToLower(y)
			}
			return strings.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			if x == y {
				return 0
			}
			return -2
		}
	}
	return -2
}

func test(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c == -1
	case "<=":
		return c == -1 || c == 0
	case ">":
		return c == 1
	case ">=":
		return c == 1 || c == 0
	}
	return false
}

func eval(e Expr, doc Doc, params map[string]any) (bool, error) {
	switch x := e.(type) {
	case And:
		l, err := eval(x.L, doc, params)
		if err != nil || !l {
			return false, err
		}
		return eval(x.R, doc, params)
	case Or:
		l, err := eval(x.L, doc, params)
		if err != nil || l {
			return l, err
		}
		return eval(x.R, doc, params)
	case Not:
		v, err := eval(x.E, doc, params)
		return !v, err
	case Compare:
		want, err := resolve(x.Value, params)
		if err != nil {
			return false, err
		}
		vals := values(x.Field, doc)
		if x.Op == "!=" {
			// Not equal: no value equals (a missing field is not equal).
			for _, v := range vals {
				if compare(v, want, x.Exact) == 0 {
					return false, nil
				}
			}
			return true, nil
		}
		if len(vals) == 0 && want == nil && x.Op == "=" {
			return true, nil // a missing field equals null
		}
		for _, v := range vals {
			if test(x.Op, compare(v, want, x.Exact)) {
				return true, nil
			}
		}
		return false, nil
	case Between:
		lo, err := resolve(x.Lo, params)
		if err != nil {
			return false, err
		}
		hi, err := resolve(x.Hi, params)
		if err != nil {
			return false, err
		}
		for _, v := range values(x.Field, doc) {
			if a, b := compare(v, lo, false), compare(v, hi, false); (a == 0 || a == 1) && (b == 0 || b == -1) {
				return true, nil
			}
		}
		return false, nil
	case In:
		var want []any
		for _, v := range x.Values {
			r, err := resolve(v, params)
			if err != nil {
				return false, err
			}
			if arr, ok := r.([]any); ok {
				for _, a := range arr {
					want = append(want, normalize(a))
				}
			} else {
				want = append(want, r)
			}
		}
		have := values(x.Field, doc)
		contains := func(w any) bool {
			for _, h := range have {
				if compare(h, w, false) == 0 {
					return true
				}
			}
			return false
		}
		if x.All {
			for _, w := range want {
				if !contains(w) {
					return false, nil
				}
			}
			return len(want) > 0, nil
		}
		for _, w := range want {
			if contains(w) {
				return true, nil
			}
		}
		return false, nil
	case Exists:
		return len(values(x.Field, doc)) > 0, nil
	case True:
		return true, nil
	case Call:
		arg, err := resolve(x.Value, params)
		if err != nil {
			return false, err
		}
		s, ok := arg.(string)
		if !ok {
			return false, fmt.Errorf("%s() needs a string, got %T", x.Name, arg)
		}
		var re *regexp.Regexp
		if x.Name == "regex" {
			if re, err = regexp.Compile(s); err != nil {
				return false, fmt.Errorf("regex(): %v", err)
			}
		}
		terms := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r != '*' && !wordRune(r) })
		for _, v := range values(x.Field, doc) {
			str, ok := v.(string)
			if !ok {
				continue
			}
			low := strings.ToLower(str)
			switch x.Name {
			case "startsWith":
				if strings.HasPrefix(low, strings.ToLower(s)) {
					return true, nil
				}
			case "endsWith":
				if strings.HasSuffix(low, strings.ToLower(s)) {
					return true, nil
				}
			case "regex":
				if re.MatchString(str) {
					return true, nil
				}
			default: // search, lucene: any term among the field's words
				words := strings.FieldsFunc(low, func(r rune) bool { return !wordRune(r) })
				if searchMatch(terms, words, x.Operator == "and") {
					return true, nil
				}
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("unknown expression %T", e)
}

// Values returns the values at a path in doc: none when it is missing,
// several when it fans out over an array.
func (p Path) Values(doc Doc) []any { return values(p, doc) }

// Project applies the query's select list to doc: each field under its
// alias (or its last path segment), a single value as itself and a fan-out
// as an array. It returns nil when the query has no select.
func (q *Query) Project(doc Doc) map[string]any {
	if len(q.Select) == 0 {
		return nil
	}
	out := make(map[string]any, len(q.Select))
	for _, pr := range q.Select {
		if pr.Func != "" {
			continue // key(), count() and sum() belong to grouped index queries, counter() to the query engine
		}
		name := pr.As
		if name == "" {
			if pr.Field.ID {
				name = "Id"
			} else if n := len(pr.Field.Segments); n > 0 {
				name = strings.TrimSuffix(pr.Field.Segments[n-1], "[]")
			}
		}
		vs := values(pr.Field, doc)
		switch {
		case len(vs) == 0:
			out[name] = nil
		case len(vs) == 1 && !strings.HasSuffix(pr.Field.String(), "[]"):
			out[name] = vs[0]
		default:
			out[name] = vs
		}
	}
	return out
}

// searchMatch tells whether the field's words hold any (all, for the and
// operator) of the search terms; a term ending in * matches as a prefix,
// one starting with * as a suffix.
func searchMatch(terms, words []string, all bool) bool {
	if len(terms) == 0 {
		return false
	}
	for _, raw := range terms {
		t := strings.Trim(raw, "*")
		prefix, suffix := strings.HasSuffix(raw, "*"), strings.HasPrefix(raw, "*")
		found := false
		for _, w := range words {
			if w == t || t != "" && (prefix && strings.HasPrefix(w, t) || suffix && strings.HasSuffix(w, t)) {
				found = true
				break
			}
		}
		if found && !all {
			return true
		}
		if !found && all {
			return false
		}
	}
	return all
}

// wordRune tells whether r belongs to a word of search(): words are split
// at every other character.
func wordRune(r rune) bool {
	return r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127
}
