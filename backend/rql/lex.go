package rql

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tString
	tNumber
	tParam
	tPunct
	tScript // the text between the braces of update { … }
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "the end of the query"
	case tString:
		return fmt.Sprintf("string %q", t.text)
	case tParam:
		return "$" + t.text
	case tScript:
		return "an update script"
	}
	return fmt.Sprintf("%q", t.text)
}

func identStart(r rune) bool { return r == '_' || r == '@' || unicode.IsLetter(r) }
func identPart(r rune) bool {
	return r == '_' || r == '@' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// lex splits a query into tokens.
func lex(s string) ([]token, error) {
	var out []token
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			return nil, &SyntaxError{Pos: i, Msg: "the query is not valid UTF-8"}
		}
		switch {
		case unicode.IsSpace(r):
			i += w
		case r == '\'' || r == '"':
			start := i
			var b strings.Builder
			i += w
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if rune(c) == r {
					if i+1 < len(s) && rune(s[i+1]) == r { // doubled quote
						b.WriteByte(c)
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return nil, &SyntaxError{Pos: start, Msg: "unterminated string"}
			}
			out = append(out, token{kind: tString, text: b.String(), pos: start})
		case r == '$':
			start := i
			i++
			j := i
			for j < len(s) {
				c, cw := utf8.DecodeRuneInString(s[j:])
				if c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
					break
				}
				j += cw
			}
			if j == i {
				return nil, &SyntaxError{Pos: start, Msg: "'$' must be followed by a parameter name"}
			}
			out = append(out, token{kind: tParam, text: s[i:j], pos: start})
			i = j
		case r >= '0' && r <= '9' || (r == '-' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9'):
			start := i
			i++
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
				((s[i] == '-' || s[i] == '+') && (s[i-1] == 'e' || s[i-1] == 'E'))) {
				i++
			}
			out = append(out, token{kind: tNumber, text: s[start:i], pos: start})
		case identStart(r):
			start := i
			for i < len(s) {
				c, cw := utf8.DecodeRuneInString(s[i:])
				if !identPart(c) {
					break
				}
				i += cw
			}
			out = append(out, token{kind: tIdent, text: s[start:i], pos: start})
			if strings.EqualFold(s[start:i], "update") {
				j := i
				for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
					j++
				}
				if j < len(s) && s[j] == '{' {
					end, err := scriptEnd(s, j)
					if err != nil {
						return nil, err
					}
					out = append(out, token{kind: tScript, text: s[j+1 : end], pos: j})
					i = end + 1
				}
			}
		default:
			start := i
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "<>":
				out = append(out, token{kind: tPunct, text: two, pos: start})
				i += 2
				continue
			}
			switch r {
			case '(', ')', ',', '.', '[', ']', '=', '<', '>':
				out = append(out, token{kind: tPunct, text: string(r), pos: start})
				i += w
			default:
				return nil, &SyntaxError{Pos: start, Msg: fmt.Sprintf("unexpected character %q", r)}
			}
		}
	}
	return out, nil
}

// scriptEnd finds the brace that closes the one at open, skipping
// JavaScript strings, template literals and comments. It counts, it does not
// recurse, so a deep script costs no stack.
func scriptEnd(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch c := s[i]; c {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		case '\'', '"', '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return 0, &SyntaxError{Pos: i, Msg: "unterminated string in the update script"}
			}
			i = j
		case '/':
			if i+1 < len(s) && s[i+1] == '/' {
				for i < len(s) && s[i] != '\n' {
					i++
				}
			} else if i+1 < len(s) && s[i+1] == '*' {
				k := strings.Index(s[i+2:], "*/")
				if k < 0 {
					return 0, &SyntaxError{Pos: i, Msg: "unterminated comment in the update script"}
				}
				i += k + 3
			}
		}
	}
	return 0, &SyntaxError{Pos: open, Msg: "the update script's '{' is never closed"}
}
