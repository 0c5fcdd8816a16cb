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
// and values are kept byte for byte.
func rebuildObject(raw []byte, skip []string, meta []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, fmt.Errorf("rookery: entity does not serialise to a JSON object: %.40s", raw)
	}
	var out bytes.Buffer
	out.Grow(len(raw) + len(meta) + 16)
	if len(skip) == 0 {
		body := bytes.TrimSpace(raw[1 : len(raw)-1])
		out.WriteByte('{')
		out.Write(body)
		if len(body) > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`"@metadata":`)
		out.Write(meta)
		out.WriteByte('}')
		return out.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("rookery: malformed JSON object")
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if contains(skip, key) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(val)
	}
	if !first {
		out.WriteByte(',')
	}
	out.WriteString(`"@metadata":`)
	out.Write(meta)
	out.WriteByte('}')
	return out.Bytes(), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
