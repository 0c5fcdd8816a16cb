package index

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// maxJSONDepth bounds the nesting jsonValue follows; deeper documents go
// through JSON.parse (which has its own limits).
const maxJSONDepth = 512

var errJSONSlow = errors.New("not on the fast path")

// jsonValue builds the JavaScript value of a JSON text directly, as
// JSON.parse would: objects with their own enumerable properties in text
// order (a repeated key keeps its last value, "__proto__" is an ordinary
// property), numbers as float64 (integral ones as integers, as goja does),
// strings as written. goja's JSON.parse goes through encoding/json's token
// stream, which allocates for every token; re-mapping a document parses its
// body and every load()ed body, so that was half the garbage of a re-map.
// Anything unusual (escapes that need decoding, invalid UTF-8, depth over
// maxJSONDepth, a syntax error) returns errJSONSlow and the caller uses
// JSON.parse, so the result is always JSON.parse's.
func jsonValue(vm *goja.Runtime, s []byte) (goja.Value, error) {
	p := jsonParser{vm: vm, s: s}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, errJSONSlow
	}
	return v, nil
}

type jsonParser struct {
	vm *goja.Runtime
	s  []byte
	i  int
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (goja.Value, error) {
	if depth > maxJSONDepth {
		return nil, errJSONSlow
	}
	p.ws()
	if p.i >= len(p.s) {
		return nil, errJSONSlow
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		o := p.vm.NewObject()
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return o, nil
		}
		for {
			p.ws()
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, errJSONSlow
			}
			p.i++
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if err := o.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				return nil, errJSONSlow
			}
			p.ws()
			if p.i >= len(p.s) {
				return nil, errJSONSlow
			}
			switch p.s[p.i] {
			case ',':
				p.i++
			case '}':
				p.i++
				return o, nil
			default:
				return nil, errJSONSlow
			}
		}
	case c == '[':
		p.i++
		var vals []any
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return p.vm.NewArray(), nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
			p.ws()
			if p.i >= len(p.s) {
				return nil, errJSONSlow
			}
			switch p.s[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return p.vm.NewArray(vals...), nil
			default:
				return nil, errJSONSlow
			}
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return p.vm.ToValue(s), nil
	case c == 't':
		return p.lit("true", p.vm.ToValue(true))
	case c == 'f':
		return p.lit("false", p.vm.ToValue(false))
	case c == 'n':
		return p.lit("null", goja.Null())
	case c == '-' || (c >= '0' && c <= '9'):
		return p.num()
	}
	return nil, errJSONSlow
}

func (p *jsonParser) lit(word string, v goja.Value) (goja.Value, error) {
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return nil, errJSONSlow
	}
	p.i += len(word)
	return v, nil
}

// str reads a string without escapes or invalid UTF-8; anything else is
// left to JSON.parse (encoding/json's exact rules for escapes, surrogates
// and replacement characters).
func (p *jsonParser) str() (string, error) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", errJSONSlow
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			b := p.s[start:j]
			if !ascii && !utf8.Valid(b) {
				return "", errJSONSlow
			}
			p.i = j + 1
			return string(b), nil
		case c == '\\' || c < 0x20:
			return "", errJSONSlow
		case c >= 0x80:
			ascii = false
		}
	}
	return "", errJSONSlow
}

// num reads a number with JSON's grammar and converts it as encoding/json
// does (strconv.ParseFloat); goja turns integral values into integers.
func (p *jsonParser) num() (goja.Value, error) {
	start := p.i
	j := p.i
	if j < len(p.s) && p.s[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		return j - k
	}
	if j < len(p.s) && p.s[j] == '0' {
		j++
	} else if digits() == 0 {
		return nil, errJSONSlow
	}
	if j < len(p.s) && p.s[j] == '.' {
		j++
		if digits() == 0 {
			return nil, errJSONSlow
		}
	}
	if j < len(p.s) && (p.s[j] == 'e' || p.s[j] == 'E') {
		j++
		if j < len(p.s) && (p.s[j] == '+' || p.s[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, errJSONSlow
		}
	}
	f, err := strconv.ParseFloat(string(p.s[start:j]), 64)
	if err != nil {
		return nil, errJSONSlow
	}
	p.i = j
	return p.vm.ToValue(f), nil
}
