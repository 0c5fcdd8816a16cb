// Package jsguard bounds JavaScript source before goja parses it. goja's
// parser is recursive: a script of a few megabytes of nested brackets
// would grow a goroutine's stack past Go's limit and kill the process, so
// scripts that users send (index maps, patches) are measured first: their
// length and their bracket nesting (brackets inside strings, template
// literals and comments do not count; inside a regular-expression literal
// they do, which errs on the side of refusing).
package jsguard

import (
	"fmt"
	"strings"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Defaults: a hand-written index map or patch is a few kilobytes deep a
// dozen levels; these leave ample room.
const (
	DefaultMaxBytes = 256 << 10
	DefaultMaxDepth = 200
)

// Check refuses a script longer than maxBytes or nesting (), [] and {}
// deeper than maxDepth, as a 400 naming what and where. what names the
// script in the message ("the map", "the patch").
func Check(what, src string, maxBytes, maxDepth int) error {
	if len(src) > maxBytes {
		return dberr.New(dberr.BadRequest, "%s is %d bytes of JavaScript; at most %d are accepted", what, len(src), maxBytes)
	}
	depth := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '(', '[', '{':
			depth++
			if depth > maxDepth {
				return dberr.New(dberr.BadRequest, "%s nests brackets deeper than %d levels (at byte %d)", what, maxDepth, i)
			}
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		case '"', '\'', '`':
			i = skipString(src, i, c)
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				for i < len(src) && src[i] != '\n' {
					i++
				}
			} else if i+1 < len(src) && src[i+1] == '*' {
				end := strings.Index(src[i+2:], "*/")
				if end < 0 {
					return nil // goja reports the unterminated comment
				}
				i += 2 + end + 1
			}
		}
	}
	return nil
}

func skipString(src string, i int, quote byte) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case quote:
			return j
		}
	}
	return len(src)
}

// String describes the limits for documentation.
func String() string {
	return fmt.Sprintf("%d bytes, %d levels of brackets", DefaultMaxBytes, DefaultMaxDepth)
}
