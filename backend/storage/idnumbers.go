package storage

import (
	"strings"
)

// IDNumbers are the figures of one id shape: ids that are Prefix followed by
// a number and Suffix ("users/" + N + "-A" for HiLo ids, "companies/" + N
// for identity ids).
type IDNumbers struct {
	Prefix string // lower-cased, separator included
	Suffix string // "" or "-" + node tag
	Docs   int64  // documents of this shape that exist
	MaxN   int64  // the highest N ever written
}

// splitNumbered recognises prefix/N and prefix/N-TAG ids (sep is the
// database separator).
func splitNumbered(id, sep string) (prefix string, n int64, suffix string, ok bool) {
	i := strings.LastIndex(id, sep)
	if i < 0 || i+len(sep) >= len(id) {
		return "", 0, "", false
	}
	rest := id[i+len(sep):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		if j >= 18 { // keep it an int64
			return "", 0, "", false
		}
		n = n*10 + int64(rest[j]-'0')
		j++
	}
	if j == 0 || (rest[0] == '0' && j > 1) {
		return "", 0, "", false
	}
	suffix = rest[j:]
	if suffix != "" {
		if suffix[0] != '-' || len(suffix) < 2 || len(suffix) > 5 {
			return "", 0, "", false
		}
		for k := 1; k < len(suffix); k++ {
			if suffix[k] < 'A' || suffix[k] > 'Z' {
				return "", 0, "", false
			}
		}
	}
	return strings.ToLower(id[:i+len(sep)]), n, suffix, true
}

// noteID records an id being created (delta +1) or deleted (-1).
func (tx *Tx) noteID(id string, delta int64) {
	prefix, n, suffix, ok := splitNumbered(id, tx.db.sep)
	if !ok {
		return
	}
	key := prefix + suffix
	d := tx.idDeltas[key]
	if d == nil {
		d = &IDNumbers{Prefix: prefix, Suffix: suffix}
		tx.idDeltas[key] = d
	}
	d.Docs += delta
	if delta > 0 && n > d.MaxN {
		d.MaxN = n
	}
}

// IDNumbers returns the figures of every id shape whose prefix is prefix
// (case-insensitive, separator included), or of all shapes when prefix is "".
func (db *DB) IDNumbers(prefix string) []IDNumbers {
	prefix = strings.ToLower(prefix)
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []IDNumbers
	if prefix != "" {
		for _, v := range db.idNumbers[prefix] {
			out = append(out, *v)
		}
		return out
	}
	for _, shapes := range db.idNumbers {
		for _, v := range shapes {
			out = append(out, *v)
		}
	}
	return out
}

// idShape returns the figures of one shape, creating them.
func (db *DB) idShape(prefix, suffix string) *IDNumbers {
	shapes := db.idNumbers[prefix]
	if shapes == nil {
		shapes = map[string]*IDNumbers{}
		db.idNumbers[prefix] = shapes
	}
	v := shapes[suffix]
	if v == nil {
		v = &IDNumbers{Prefix: prefix, Suffix: suffix}
		shapes[suffix] = v
	}
	return v
}
