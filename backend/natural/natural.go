// Package natural orders strings the way people read ids: runs of digits
// compare by their number, so carts/2 comes before carts/10, and the rest
// compares byte by byte. It is a total order (every two different strings
// compare as different), so it can key a sort and a keyset cursor.
package natural

// isDigit reports an ASCII digit; other scripts' digits compare as text.
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b.
//
// Digit runs compare as numbers of any length (no overflow: by length once
// leading zeros are dropped, then digit by digit). Numbers that are equal
// with different leading zeros ("7" and "007") are told apart afterwards,
// fewer zeros first, so that only equal strings compare equal. Everything
// else compares as bytes; callers that ignore case pass lower-cased keys.
func Compare(a, b string) int {
	zeros := 0 // the first difference in leading zeros, as a tie-break
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if !isDigit(ca) || !isDigit(cb) {
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			i++
			j++
			continue
		}
		// Two digit runs: skip leading zeros, then compare lengths and
		// digits.
		za, zb := i, j
		for za < len(a) && a[za] == '0' {
			za++
		}
		for zb < len(b) && b[zb] == '0' {
			zb++
		}
		ea, eb := za, zb
		for ea < len(a) && isDigit(a[ea]) {
			ea++
		}
		for eb < len(b) && isDigit(b[eb]) {
			eb++
		}
		if la, lb := ea-za, eb-zb; la != lb {
			if la < lb {
				return -1
			}
			return 1
		}
		for k := 0; k < ea-za; k++ {
			if da, db := a[za+k], b[zb+k]; da != db {
				if da < db {
					return -1
				}
				return 1
			}
		}
		if zeros == 0 && za-i != zb-j {
			if za-i < zb-j {
				zeros = -1
			} else {
				zeros = 1
			}
		}
		i, j = ea, eb
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	return zeros
}

// Less reports whether a sorts before b.
func Less(a, b string) bool { return Compare(a, b) < 0 }
