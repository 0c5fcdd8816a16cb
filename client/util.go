package client

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// newUUID returns a random (version 4) UUID string.
func newUUID() string {
	var b [16]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// rebuildObject copies the members of the JSON object raw, leaving out the
// keys in skip, and appends "@metadata": meta as the last member. Member order
// and values are kept byte for byte. raw must be valid JSON (as produced by
// encoding/json).
func rebuildObject(raw []byte, skip []string, meta []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, fmt.Errorf("rookery: entity does not serialise to a JSON object: %.40s", raw)
	}
	out := make([]byte, 0, len(raw)+len(meta)+16)
	out = append(out, '{')
	first := true
	i := 1
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, errMalformed
		}
		if raw[i] == '}' {
			break
		}
		if raw[i] == ',' {
			i++
			continue
		}
		if raw[i] != '"' {
			return nil, errMalformed
		}
		keyStart := i
		keyEnd, escaped := scanString(raw, i)
		if keyEnd < 0 {
			return nil, errMalformed
		}
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errMalformed
		}
		valEnd := scanValue(raw, skipSpace(raw, i+1))
		if valEnd < 0 {
			return nil, errMalformed
		}
		keep := true
		if len(skip) > 0 {
			key := string(raw[keyStart+1 : keyEnd-1])
			if escaped {
				if err := json.Unmarshal(raw[keyStart:keyEnd], &key); err != nil {
					return nil, errMalformed
				}
			}
			keep = !contains(skip, key)
		}
		if keep {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, raw[keyStart:valEnd]...)
		}
		i = valEnd
	}
	if !first {
		out = append(out, ',')
	}
	out = append(out, `"@metadata":`...)
	out = append(out, meta...)
	out = append(out, '}')
	return out, nil
}

var errMalformed = errors.New("rookery: malformed JSON object")

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just past the string starting at b[i] ('"'),
// or -1, and whether it contains escapes.
func scanString(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// scanValue returns the index just past the JSON value starting at b[i], or
// -1.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := scanString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
