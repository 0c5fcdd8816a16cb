package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"modernc.org/sqlite"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/rql"
)

var regexCache sync.Map // pattern -> *regexp.Regexp

// loneSearch is the SQL of a where clause that is one search() over a
// full-text field, as sqlBuilder writes it.
var loneSearch = regexp.MustCompile(`^e\.eid IN \(SELECT rowid FROM (fts[0-9]+) WHERE fts[0-9]+ MATCH \?\)$`)

// loneEquality is the where clause of a lone equality on a field column
// (its count is read from value_counts).
var loneEquality = regexp.MustCompile(`^e\.c([0-9]+) = \?$`)

func init() {
	// rookery_alnum orders text as RavenDB's alphaNumeric does: runs of
	// digits compare as numbers ("item-9" before "item-10").
	sqlite.MustRegisterCollationUtf8("rookery_alnum", AlphaNumericCompare)
	// rookery_regexp(pattern, value): regex() over a stored original value.
	sqlite.MustRegisterDeterministicScalarFunction("rookery_regexp", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		pat, _ := args[0].(string)
		s, ok := args[1].(string)
		if !ok {
			return int64(0), nil
		}
		re, err := compileRegex(pat)
		if err != nil {
			return nil, err
		}
		if re.MatchString(s) {
			return int64(1), nil
		}
		return int64(0), nil
	})
	// rookery_search(terms, and, value): search() over a field that is not
	// full-text indexed: any (or every) term among the value's words.
	sqlite.MustRegisterDeterministicScalarFunction("rookery_search", 3, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		terms, _ := args[0].(string)
		all, _ := args[1].(int64)
		s, ok := args[2].(string)
		if !ok {
			return int64(0), nil
		}
		if searchMatch(strings.Fields(terms), all == 1, s) {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

func compileRegex(p string) (*regexp.Regexp, error) {
	if re, ok := regexCache.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	regexCache.Store(p, re)
	return re, nil
}

func isWordRune(r rune) bool {
	return r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127
}

// words splits a value as the default analyzer does (lower-cased).
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) })
}

func searchMatch(terms []string, all bool, s string) bool {
	ws := words(s)
	hit := func(t string) bool {
		prefix := strings.HasSuffix(t, "*")
		t = strings.Trim(strings.ToLower(t), "*")
		for _, w := range ws {
			if w == t || (prefix && t != "" && strings.HasPrefix(w, t)) {
				return true
			}
		}
		return false
	}
	if len(terms) == 0 {
		return false
	}
	for _, t := range terms {
		if hit(t) != all {
			return !all
		}
	}
	return all
}

// ftsQuery builds an FTS5 MATCH string from search terms: every token is
// a quoted string (quotes doubled), a trailing '*' makes it a prefix.
func ftsQuery(terms []string, all bool) string {
	var parts []string
	for _, t := range terms {
		prefix := strings.HasSuffix(t, "*")
		ws := words(strings.Trim(t, "*"))
		if len(ws) == 0 {
			continue
		}
		q := `"` + strings.ReplaceAll(strings.Join(ws, " "), `"`, `""`) + `"`
		if prefix {
			q += " *"
		}
		parts = append(parts, q)
	}
	op := " OR "
	if all {
		op = " AND "
	}
	return strings.Join(parts, op)
}

// searchAnd reads the search operator from rql.Call when the grammar has
// one (a string field Op or Operator): "and" needs every term.
func searchAnd(c rql.Call) bool {
	v := reflect.ValueOf(c)
	for _, n := range []string{"Op", "Operator"} {
		if f := v.FieldByName(n); f.IsValid() && f.Kind() == reflect.String {
			return strings.EqualFold(f.String(), "and")
		}
	}
	return false
}

// sqlBuilder translates a where clause to SQL over entries e; user values
// are bound parameters only.
type sqlBuilder struct {
	fields  map[string]*field
	params  map[string]any
	args    []any
	reduced bool
}

func badReq(format string, args ...any) error { return dberr.New(dberr.BadRequest, format, args...) }

func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "?"
}

func (b *sqlBuilder) value(v rql.Value) (any, error) {
	if v.Param == "" {
		return paramValue(v.Literal), nil
	}
	x, ok := b.params[v.Param]
	if !ok {
		return nil, badReq("the query uses $%s, which has no value", v.Param)
	}
	return paramValue(x), nil
}

// onField applies pred to every value of a field: the column, or, for a
// multi-valued field, also the arr rows.
func (b *sqlBuilder) onField(f *field, pred func(v, x string) string) string {
	c := fmt.Sprintf("e.c%d", f.col)
	x := fmt.Sprintf("coalesce(e.x%d, e.c%d)", f.col, f.col)
	p := pred(c, x)
	if !f.multi {
		return p
	}
	return fmt.Sprintf("(%s OR e.eid IN (SELECT a.eid FROM arr a WHERE a.col = %d AND %s))", p, f.col, pred("a.v", "coalesce(a.x, a.v)"))
}

func (b *sqlBuilder) missing(f *field) string {
	if !f.multi {
		return fmt.Sprintf("e.c%d IS NULL", f.col)
	}
	return fmt.Sprintf("(e.c%d IS NULL AND e.eid NOT IN (SELECT a.eid FROM arr a WHERE a.col = %d))", f.col, f.col)
}

func (b *sqlBuilder) lookup(p rql.Path) (*field, bool) {
	f, ok := b.fields[fieldKey(p.String())]
	return f, ok
}

// eq is "some value equals want" (want already normalized).
func (b *sqlBuilder) eq(f *field, want any, exact bool) string {
	switch w := want.(type) {
	case nil:
		return "(" + b.missing(f) + " OR " + b.onField(f, func(v, _ string) string { return v + " = x''" }) + ")"
	case string:
		low := strings.ToLower(w)
		if exact {
			return b.onField(f, func(v, x string) string { return fmt.Sprintf("(%s = %s AND %s = %s)", v, b.arg(low), x, b.arg(w)) })
		}
		return b.onField(f, func(v, _ string) string { return v + " = " + b.arg(low) })
	case float64, bool:
		val, _ := encode(w)
		return b.onField(f, func(v, _ string) string { return v + " = " + b.arg(val) })
	}
	return "0"
}

func (b *sqlBuilder) expr(e rql.Expr) (string, error) {
	switch x := e.(type) {
	case rql.And:
		l, err := b.expr(x.L)
		if err != nil {
			return "", err
		}
		r, err := b.expr(x.R)
		if err != nil {
			return "", err
		}
		return "(" + l + " AND " + r + ")", nil
	case rql.Or:
		l, err := b.expr(x.L)
		if err != nil {
			return "", err
		}
		r, err := b.expr(x.R)
		if err != nil {
			return "", err
		}
		return "(" + l + " OR " + r + ")", nil
	case rql.Not:
		in, err := b.expr(x.E)
		if err != nil {
			return "", err
		}
		return "(NOT coalesce(" + in + ", 0))", nil
	case rql.Compare:
		want, err := b.value(x.Value)
		if err != nil {
			return "", err
		}
		if x.Field.ID {
			return b.idCompare(x.Op, want)
		}
		f, ok := b.lookup(x.Field)
		if !ok {
			// A field no entry has: every value is missing.
			if x.Op == "!=" || (x.Op == "=" && want == nil) {
				return "1", nil
			}
			return "0", nil
		}
		if x.Op == "!=" {
			return "(NOT coalesce(" + b.eq(f, want, x.Exact) + ", 0))", nil
		}
		if x.Op == "=" {
			return b.eq(f, want, x.Exact), nil
		}
		return b.rangeOp(f, x.Op, want, x.Exact)
	case rql.Between:
		lo, err := b.value(x.Lo)
		if err != nil {
			return "", err
		}
		hi, err := b.value(x.Hi)
		if err != nil {
			return "", err
		}
		f, ok := b.lookup(x.Field)
		if !ok || reflect.TypeOf(lo) != reflect.TypeOf(hi) {
			return "0", nil
		}
		switch lo.(type) {
		case string:
			l, h := strings.ToLower(lo.(string)), strings.ToLower(hi.(string))
			return b.onField(f, func(v, _ string) string {
				return fmt.Sprintf("(%s >= %s AND %s <= %s)", v, b.arg(l), v, b.arg(h))
			}), nil
		case float64:
			// Numbers sort before text and blobs in SQLite, and NULL
			// compares to nothing, so two numeric bounds already keep
			// only numbers (a third test, < '', cost a third more per row).
			return b.onField(f, func(v, _ string) string {
				return fmt.Sprintf("(%s >= %s AND %s <= %s)", v, b.arg(lo), v, b.arg(hi))
			}), nil
		}
		return "0", nil
	case rql.In:
		var want []any
		for _, v := range x.Values {
			r, err := b.value(v)
			if err != nil {
				return "", err
			}
			if arr, ok := r.([]any); ok {
				for _, a := range arr {
					want = append(want, paramValue(a))
				}
			} else {
				want = append(want, r)
			}
		}
		if len(want) == 0 {
			return "0", nil
		}
		if x.Field.ID {
			var parts []string
			for _, w := range want {
				s, err := b.idCompare("=", w)
				if err != nil {
					return "", err
				}
				parts = append(parts, s)
			}
			return "(" + strings.Join(parts, " OR ") + ")", nil
		}
		f, ok := b.lookup(x.Field)
		if !ok {
			return "0", nil
		}
		var parts []string
		for _, w := range want {
			parts = append(parts, b.eq(f, w, false))
		}
		op := " OR "
		if x.All {
			op = " AND "
		}
		return "(" + strings.Join(parts, op) + ")", nil
	case rql.Exists:
		if x.Field.ID {
			return "1", nil
		}
		f, ok := b.lookup(x.Field)
		if !ok {
			return "0", nil
		}
		return "(NOT " + b.missing(f) + ")", nil
	case rql.Call:
		arg, err := b.value(x.Value)
		if err != nil {
			return "", err
		}
		s, ok := arg.(string)
		if !ok {
			return "", badReq("%s() needs a string, got %T", x.Name, arg)
		}
		if x.Name == "regex" {
			if _, err := compileRegex(s); err != nil {
				return "", badReq("regex(): %v", err)
			}
		}
		if x.Field.ID {
			return b.idCall(x.Name, s)
		}
		f, ok := b.lookup(x.Field)
		if !ok {
			return "0", nil
		}
		low := strings.ToLower(s)
		switch x.Name {
		case "startsWith":
			if hi, ok := prefixUpperBound(low); ok && low != "" {
				return b.onField(f, func(v, _ string) string {
					return fmt.Sprintf("(%s >= %s AND %s < %s)", v, b.arg(low), v, b.arg(hi))
				}), nil
			}
			return b.onField(f, func(v, _ string) string { return fmt.Sprintf("(%s >= %s AND %s < x'')", v, b.arg(low), v) }), nil
		case "endsWith":
			n := utf8.RuneCountInString(low)
			if n == 0 {
				return b.onField(f, func(v, _ string) string { return "typeof(" + v + ") = 'text'" }), nil
			}
			return b.onField(f, func(v, _ string) string {
				return fmt.Sprintf("(typeof(%s) = 'text' AND substr(%s, -%d) = %s)", v, v, n, b.arg(low))
			}), nil
		case "regex":
			return b.onField(f, func(_, xv string) string { return fmt.Sprintf("rookery_regexp(%s, %s)", b.arg(s), xv) }), nil
		case "search", "lucene":
			terms := strings.Fields(s)
			all := searchAnd(x)
			if f.search {
				q := ftsQuery(terms, all)
				if q == "" {
					return "0", nil
				}
				return fmt.Sprintf("e.eid IN (SELECT rowid FROM fts%d WHERE fts%d MATCH %s)", f.col, f.col, b.arg(q)), nil
			}
			flag := int64(0)
			if all {
				flag = 1
			}
			return b.onField(f, func(_, xv string) string {
				return fmt.Sprintf("rookery_search(%s, %s, %s)", b.arg(strings.Join(terms, " ")), b.arg(flag), xv)
			}), nil
		}
		return "", badReq("%s() is not supported in an index query", x.Name)
	case nil:
		return "1", nil
	}
	return "", badReq("unsupported where expression %T", e)
}

func (b *sqlBuilder) rangeOp(f *field, op string, want any, exact bool) (string, error) {
	switch w := want.(type) {
	case float64:
		return b.onField(f, func(v, _ string) string {
			if op == ">" || op == ">=" {
				return fmt.Sprintf("(%s %s %s AND %s < '')", v, op, b.arg(w), v)
			}
			return fmt.Sprintf("%s %s %s", v, op, b.arg(w))
		}), nil
	case string:
		if exact {
			return b.onField(f, func(v, x string) string {
				return fmt.Sprintf("(typeof(%s) = 'text' AND %s %s %s)", v, x, op, b.arg(w))
			}), nil
		}
		low := strings.ToLower(w)
		return b.onField(f, func(v, _ string) string {
			if op == ">" || op == ">=" {
				return fmt.Sprintf("(%s %s %s AND %s < x'')", v, op, b.arg(low), v)
			}
			return fmt.Sprintf("(%s %s %s AND %s >= '')", v, op, b.arg(low), v)
		}), nil
	}
	return "0", nil
}

func (b *sqlBuilder) idCompare(op string, want any) (string, error) {
	s, ok := want.(string)
	if !ok || b.reduced {
		if op == "!=" {
			return "1", nil
		}
		return "0", nil
	}
	switch op {
	case "=", "!=", "<", "<=", ">", ">=":
		return "e.doc " + op + " " + b.arg(strings.ToLower(s)), nil
	}
	return "", badReq("unsupported operator %s", op)
}

func (b *sqlBuilder) idCall(name, s string) (string, error) {
	if b.reduced {
		return "0", nil
	}
	low := strings.ToLower(s)
	switch name {
	case "startsWith":
		if hi, ok := prefixUpperBound(low); ok && low != "" {
			return fmt.Sprintf("(e.doc >= %s AND e.doc < %s)", b.arg(low), b.arg(hi)), nil
		}
		return "1", nil
	case "endsWith":
		return fmt.Sprintf("substr(e.doc, -%d) = %s", utf8.RuneCountInString(low), b.arg(low)), nil
	case "regex":
		return fmt.Sprintf("rookery_regexp(%s, e.id)", b.arg(s)), nil
	}
	return fmt.Sprintf("rookery_search(%s, 0, e.id)", b.arg(s)), nil
}

func prefixUpperBound(p string) (string, bool) {
	bs := []byte(p)
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i] < 0xff {
			bs[i]++
			return string(bs[:i+1]), true
		}
	}
	return "", false
}

// Compile translates a query to the SQL Search runs: the count statement,
// the page statement and their arguments (exported for the benchmark's raw
// baseline).
func (ix *Index) Compile(q SearchQuery) (count, page string, args []any, err error) {
	ix.mu.RLock()
	b := &sqlBuilder{fields: make(map[string]*field, len(ix.fields)), params: q.Params, reduced: ix.mapper.reduces()}
	for k, f := range ix.fields {
		c := *f
		b.fields[k] = &c
	}
	dupes := ix.multiEntries
	ix.mu.RUnlock()
	where := "1"
	if q.Where != nil {
		if where, err = b.expr(q.Where); err != nil {
			return "", "", nil, err
		}
	}
	var order []string
	for _, o := range q.OrderBy {
		dir := ""
		if o.Desc {
			dir = " DESC"
		}
		switch {
		case o.Random:
			order = append(order, "random()")
		case o.Field.ID:
			order = append(order, "e.doc"+dir)
		default:
			f, ok := b.fields[fieldKey(o.Field.String())]
			if !ok {
				continue // score() and unknown fields: index order
			}
			col := fmt.Sprintf("e.c%d", f.col)
			switch strings.ToLower(o.As) {
			case "long", "double":
				// Numbers first, in numeric order, then the rest.
				order = append(order, fmt.Sprintf("(typeof(%s) NOT IN ('integer', 'real'))", col), col+dir)
			case "alphanumeric":
				order = append(order, col+" COLLATE rookery_alnum"+dir)
			default:
				order = append(order, col+dir)
			}
		}
	}
	if len(q.OrderBy) == 0 {
		// A lone range on a single-valued field, with no order asked:
		// answer in the column index's order (value, then entry), which
		// the page reads straight off the index. Entry order would sort
		// every match to return ten. The order is still total, so pages
		// are disjoint.
		if col, ok := b.rangeColumn(q.Where); ok {
			order = append(order, col)
		}
	}
	order = append(order, "e.eid")
	countCol := "count(*)"
	if dupes {
		countCol = "count(DISTINCT e.doc)"
	}
	count = "SELECT " + countCol + " FROM entries e WHERE " + where
	page = "SELECT e.doc, e.id, e.stored FROM entries e WHERE " + where + " ORDER BY " + strings.Join(order, ", ")
	if m := loneSearch.FindStringSubmatch(where); m != nil && !dupes && len(q.OrderBy) == 0 {
		// A lone search(): the full-text table has one row per entry
		// (rowid = eid) and yields its matches in rowid order, so the count
		// and the page read it directly instead of probing entries for
		// every match.
		count = "SELECT count(*) FROM " + m[1] + " WHERE " + m[1] + " MATCH ?"
		page = "SELECT e.doc, e.id, e.stored FROM " + m[1] + " f JOIN entries e ON e.eid = f.rowid WHERE " + m[1] + " MATCH ? ORDER BY f.rowid"
	}
	if m := loneEquality.FindStringSubmatch(where); m != nil && !dupes && len(b.args) == 1 {
		// A lone equality on a column: value_counts holds how many entries
		// have each value, kept in the same transactions as the entries.
		count = "SELECT coalesce((SELECT n FROM value_counts WHERE col = " + m[1] + " AND v = ?), 0)"
	}
	if !dupes {
		take := q.Take
		if take < 0 {
			take = -1
		}
		page += fmt.Sprintf(" LIMIT %d OFFSET %d", take, max(q.Skip, 0))
	}
	return count, page, b.args, nil
}

// Search runs a query over the index (see api.go).
func (ix *Index) Search(ctx context.Context, q SearchQuery) (*SearchResult, error) {
	count, page, args, err := ix.Compile(q)
	if err != nil {
		return nil, err
	}
	ix.mu.RLock()
	dupes := ix.multiEntries
	ix.mu.RUnlock()
	ix.connMu.RLock()
	defer ix.connMu.RUnlock()
	if ix.closed.Load() {
		return nil, dberr.New(dberr.InvalidOperation, "index '%s' is closed", ix.def.Name)
	}
	rtx, err := ix.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer rtx.Rollback()
	res := &SearchResult{Hits: []Hit{}}
	if err := rtx.QueryRowContext(ctx, count, args...).Scan(&res.TotalResults); err != nil {
		return nil, fmt.Errorf("index '%s': %w", ix.def.Name, err)
	}
	if q.Take == 0 {
		return res, nil
	}
	rows, err := rtx.QueryContext(ctx, page, args...)
	if err != nil {
		return nil, fmt.Errorf("index '%s': %w", ix.def.Name, err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	skip := max(q.Skip, 0)
	for rows.Next() {
		var doc string
		var id, stored sql.NullString
		if err := rows.Scan(&doc, &id, &stored); err != nil {
			return nil, err
		}
		if dupes {
			if seen[doc] {
				res.SkippedResults++
				continue
			}
			seen[doc] = true
			if skip > 0 {
				skip--
				continue
			}
		}
		h := Hit{DocID: id.String}
		if stored.Valid {
			h.Stored = json.RawMessage(stored.String)
		}
		res.Hits = append(res.Hits, h)
		if q.Take > 0 && len(res.Hits) >= q.Take {
			break
		}
	}
	return res, rows.Err()
}

// AlphaNumericCompare compares two strings with their runs of ASCII digits
// taken as numbers: "a9" < "a10" < "b1". Equal numbers with different
// leading zeros, and everything else, fall back to byte order.
func AlphaNumericCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				if len(na) < len(nb) {
					return -1
				}
				return 1
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		i++
		j++
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// rangeColumn is the column of a where clause that is one range (<, <=,
// >, >=, between) on a field without array values.
func (b *sqlBuilder) rangeColumn(w rql.Expr) (string, bool) {
	var p rql.Path
	switch v := w.(type) {
	case rql.Between:
		p = v.Field
	case rql.Compare:
		if v.Op == "=" || v.Op == "!=" || v.Exact {
			return "", false
		}
		p = v.Field
	default:
		return "", false
	}
	if p.ID {
		return "", false
	}
	f, ok := b.lookup(p)
	if !ok || f.multi {
		return "", false
	}
	return fmt.Sprintf("e.c%d", f.col), true
}
