package client

import (
	"strings"
	"unicode"
)

// English pluralisation for collection names.
//
// The rules work on the last word of a CamelCase name (OrderLine → Lines is
// decided by "Line"), keep the case of everything they do not replace, and
// are tried in this order: uncountable words, irregular words, suffix rules,
// then a plain "s".

// uncountableWords are returned unchanged.
var uncountableWords = map[string]bool{
	"equipment": true, "information": true, "rice": true, "money": true,
	"species": true, "series": true, "fish": true, "sheep": true,
	"deer": true, "news": true, "jeans": true, "police": true,
	"aircraft": true, "software": true, "hardware": true, "feedback": true,
	"metadata": true, "data": true, "staff": true, "moose": true,
	"swine": true, "bison": true, "salmon": true, "trout": true,
	"offspring": true, "luggage": true, "baggage": true, "furniture": true,
	"advice": true, "knowledge": true, "traffic": true, "weather": true,
}

// irregularWords maps a lower-case singular to its lower-case plural.
var irregularWords = map[string]string{
	"person": "people", "man": "men", "woman": "women", "child": "children",
	"ox": "oxen", "mouse": "mice", "louse": "lice", "goose": "geese",
	"tooth": "teeth", "foot": "feet", "sex": "sexes", "move": "moves",
	"zombie": "zombies", "cow": "cows", "leaf": "leaves", "thief": "thieves",
	"loaf": "loaves", "die": "dice", "cactus": "cacti", "focus": "foci",
	"nucleus": "nuclei", "radius": "radii", "stimulus": "stimuli",
	"criterion": "criteria", "phenomenon": "phenomena", "quiz": "quizzes",
	"datum": "data", "medium": "media", "bacterium": "bacteria",
	"curriculum": "curricula", "memorandum": "memoranda",
	"hero": "heroes", "potato": "potatoes", "tomato": "tomatoes",
	"echo": "echoes", "torpedo": "torpedoes", "veto": "vetoes",
	"buffalo": "buffaloes", "knife": "knives", "wife": "wives", "life": "lives",
	"matrix": "matrices", "vertex": "vertices", "index": "indices",
	"appendix": "appendices", "axis": "axes", "testis": "testes",
}

// suffixRule replaces the suffix `from` of a word by `to`.
type suffixRule struct {
	from string
	to   string
	// needConsonantBefore requires the character before the suffix to be a
	// consonant (used by -y → -ies: "day" → "days" but "city" → "cities").
	needConsonantBefore bool
}

var suffixRules = []suffixRule{
	{from: "quy", to: "quies"},
	{from: "y", to: "ies", needConsonantBefore: true},
	{from: "sis", to: "ses"},
	{from: "lf", to: "lves"},
	{from: "rf", to: "rves"},
	{from: "ss", to: "sses"},
	{from: "sh", to: "shes"},
	{from: "ch", to: "ches"},
	{from: "zz", to: "zzes"},
	{from: "s", to: "ses"},
	{from: "x", to: "xes"},
	{from: "z", to: "zes"},
}

// Pluralize returns the English plural of a (usually singular) name, keeping
// its case: "Company" → "Companies", "Person" → "People", "OrderLine" →
// "OrderLines", "Equipment" → "Equipment".
func Pluralize(name string) string {
	if name == "" {
		return name
	}
	start := lastWordStart(name)
	head, word := name[:start], name[start:]
	lower := strings.ToLower(word)
	if uncountableWords[lower] {
		return name
	}
	if p, ok := irregularWords[lower]; ok {
		return head + matchCase(word, p)
	}
	for _, r := range suffixRules {
		if !strings.HasSuffix(lower, r.from) {
			continue
		}
		stem := len(word) - len(r.from)
		if r.needConsonantBefore {
			if stem == 0 || isVowel(lower[stem-1]) {
				continue
			}
		}
		if len(word) > 1 && isAllUpper(word) {
			return head + word[:stem] + strings.ToUpper(r.to)
		}
		return head + word[:stem] + r.to
	}
	return head + word + "s"
}

// lastWordStart finds where the last CamelCase word starts: at the last
// upper-case letter that follows a lower-case letter or digit, or that starts
// a capitalised word after an acronym ("HTTPServer" → "Server").
func lastWordStart(s string) int {
	runes := []rune(s)
	start := 0
	for i := 1; i < len(runes); i++ {
		c := runes[i]
		prev := runes[i-1]
		switch {
		case c == '_' || c == '-' || c == ' ':
			start = i + 1
		case unicode.IsUpper(c) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			start = i
		case unicode.IsUpper(c) && unicode.IsUpper(prev) && i+1 < len(runes) && unicode.IsLower(runes[i+1]):
			start = i
		}
	}
	if start >= len(runes) {
		return len(s)
	}
	return len(string(runes[:start]))
}

// matchCase gives replacement the case shape of original: all upper-case if
// original is (and has more than one letter), capitalised if original starts
// with an upper-case letter, else as given (lower-case).
func matchCase(original, replacement string) string {
	if original == "" || replacement == "" {
		return replacement
	}
	upper, letters := 0, 0
	for _, r := range original {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				upper++
			}
		}
	}
	if letters > 1 && upper == letters {
		return strings.ToUpper(replacement)
	}
	if first := []rune(original)[0]; unicode.IsUpper(first) {
		r := []rune(replacement)
		r[0] = unicode.ToUpper(r[0])
		return string(r)
	}
	return replacement
}

func isAllUpper(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) && !unicode.IsUpper(r) {
			return false
		}
	}
	return true
}

func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u':
		return true
	}
	return false
}
