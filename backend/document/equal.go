package document

import (
	"bytes"
	"encoding/json"
)

// JSONEqual tells whether two JSON texts hold the same value (key order
// and spacing aside).
func JSONEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
