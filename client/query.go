package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// OrderingType tells the server how to compare the values of an order-by
// field: as strings (the default), as integers, as floating-point numbers, or
// alphanumerically (digit runs inside strings compared as numbers).
type OrderingType string

// Ordering types of OrderBy and OrderByDescending.
const (
	OrderingString       OrderingType = "String"
	OrderingLong         OrderingType = "Long"
	OrderingDouble       OrderingType = "Double"
	OrderingAlphaNumeric OrderingType = "AlphaNumeric"
)

// SearchOperator joins the terms of a full-text Search: any term (Or, the
// default) or every term (And).
type SearchOperator string

// Search operators.
const (
	SearchOr  SearchOperator = "OR"
	SearchAnd SearchOperator = "AND"
)

// DefaultWaitForNonStaleResultsTimeout is the wait of WaitForNonStaleResults
// when no timeout is given (the npm client's default).
const DefaultWaitForNonStaleResultsTimeout = 15 * time.Second

// Errors of query terminal operations.
var (
	// ErrNoResults: Single found nothing.
	ErrNoResults = errors.New("rookery: the query returned no result")
	// ErrMoreThanOneResult: Single found more than one result.
	ErrMoreThanOneResult = errors.New("rookery: the query returned more than one result")
)

// Query builds an RQL query the way RavenDB's clients do and runs it with
// POST /databases/{db}/queries. The RQL text and its parameters ($p0, $p1,
// … in the order the builder calls were made) are exactly those the npm
// client 7.2.2 sends for the same calls. Builder methods return the query
// for chaining; a misuse (an unclosed subclause, an operator after an
// operator) is reported by the terminal operation.
//
// A Query belongs to its Session and is not safe for concurrent use.
type Query struct {
	s *Session

	collection string // from '<collection>' (dynamic query)
	index      string // from index '<index>'
	raw        string // RawQuery text
	isRaw      bool

	where    []qtoken
	orderBy  []orderToken
	groupBy  []string
	selects  []selectToken
	includes []string
	params   map[string]any
	nparams  int // parameters added so far (names are p<n>)

	start    *int
	pageSize *int
	negate   bool
	depth    int
	isGroup  bool
	distinct bool
	fields   bool // SelectFields was called

	wait        bool
	waitTimeout time.Duration
	noCaching   bool
	stats       *QueryStatistics
	err         error
}

// QueryStatistics describe how the server answered a query. Pass a pointer
// to Query.Statistics; it is filled when the query runs.
type QueryStatistics struct {
	IsStale        bool
	DurationInMs   int64 // -1 when the answer came from the client's HTTP cache (304)
	TotalResults   int64
	SkippedResults int64
	IndexName      string // e.g. "Auto/Orders/ByName", "collection/Orders", "Pets/ByOwner"
	IndexTimestamp time.Time
	LastQueryTime  time.Time
	ResultEtag     int64
	NodeTag        string
}

// qtoken is one token of the where clause.
type qtoken struct {
	kind   qkind
	op     string // for kindWhere: "=", "!=", ">", ">=", "<", "<=", "in", "all in", "between", "startsWith", "endsWith", "exists", "regex", "search"
	field  string
	param  string
	param2 string // between: the upper bound
	exact  bool
	boost  *float64
	search SearchOperator // set on search tokens
}

type qkind int

const (
	kindWhere qkind = iota
	kindOpen
	kindClose
	kindAnd
	kindOr
	kindNot
	kindTrue
)

type orderToken struct {
	field    string
	desc     bool
	ordering OrderingType
}

type selectToken struct {
	text string // already rendered
}

// Query starts a dynamic query over a collection ("Orders"): the server
// answers it from the collection (id() conditions only) or from an auto
// index it picks or creates.
func (s *Session) Query(collection string) *Query {
	return &Query{s: s, collection: collection, params: map[string]any{}}
}

// QueryIndex starts a query over a static or auto index by name
// ("Pets/ByOwner").
func (s *Session) QueryIndex(indexName string) *Query {
	return &Query{s: s, index: indexName, params: map[string]any{}}
}

// QueryType starts a dynamic query over the collection of an entity type
// (e.g. QueryType(&Order{}) queries "Orders").
func (s *Session) QueryType(example any) *Query {
	q := s.Query(s.store.CollectionName(example))
	if q.collection == "" {
		q.err = fmt.Errorf("rookery: QueryType: %T has no collection", example)
	}
	return q
}

// RawQuery runs RQL as written; its $name parameters are given with
// AddParameter. Only Skip, Take, WaitForNonStaleResults, Statistics,
// NoCaching and AddParameter may be combined with it.
func (s *Session) RawQuery(rql string) *Query {
	return &Query{s: s, raw: rql, isRaw: true, params: map[string]any{}}
}

func (q *Query) fail(err error) *Query {
	if q.err == nil {
		q.err = err
	}
	return q
}

func (q *Query) noRaw(what string) bool {
	if q.isRaw {
		q.fail(fmt.Errorf("rookery: %s cannot be used on a raw query", what))
		return false
	}
	return true
}

// AddParameter sets a named parameter ($name in the RQL; a leading "$" is
// dropped). Adding the same name twice is an error.
func (q *Query) AddParameter(name string, value any) *Query {
	name = strings.TrimPrefix(name, "$")
	if _, ok := q.params[name]; ok {
		return q.fail(fmt.Errorf("rookery: the parameter %s was already added", name))
	}
	q.params[name] = value
	q.nparams++
	return q
}

// addParam adds an automatically named parameter (p<number of parameters>)
// and returns its name.
func (q *Query) addParam(v any) string {
	name := "p" + strconv.Itoa(q.nparams)
	q.params[name] = v
	q.nparams++
	return name
}

// queryValue converts a Go value to the parameter value the npm client
// would send: time.Time as a UTC string with 7 fraction digits.
func queryValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.0000000Z")
	case *time.Time:
		if x == nil {
			return nil
		}
		return x.UTC().Format("2006-01-02T15:04:05.0000000Z")
	}
	return v
}

// flatten turns a slice (of slices…) into a flat list of parameter values.
func flatten(values any) []any {
	out := []any{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if (v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8) || v.Kind() == reflect.Array {
			for i := range v.Len() {
				walk(v.Index(i))
			}
			return
		}
		if !v.IsValid() {
			out = append(out, nil)
			return
		}
		out = append(out, queryValue(v.Interface()))
	}
	if values == nil {
		return out
	}
	walk(reflect.ValueOf(values))
	return out
}

// appendOperator adds the default "and" after a where clause or a closed
// subclause ("or" after a search, as the npm client does).
func (q *Query) appendOperator() {
	if len(q.where) == 0 {
		return
	}
	last := q.where[len(q.where)-1]
	if last.kind != kindWhere && last.kind != kindClose {
		return
	}
	kind := kindAnd
	for i := len(q.where) - 1; i >= 0; i-- {
		if q.where[i].kind == kindWhere {
			if q.where[i].search != "" {
				kind = kindOr
			}
			break
		}
	}
	q.where = append(q.where, qtoken{kind: kind})
}

// negateIfNeeded writes a pending Not. A negation cannot start a clause,
// so it is preceded by exists(field) (or true) and "and" there.
func (q *Query) negateIfNeeded(field string) {
	if !q.negate {
		return
	}
	q.negate = false
	if len(q.where) == 0 || q.where[len(q.where)-1].kind == kindOpen {
		if field != "" {
			q.WhereExists(field)
		} else {
			q.whereTrue()
		}
		q.AndAlso()
	}
	q.where = append(q.where, qtoken{kind: kindNot})
}

func (q *Query) whereTrue() {
	q.appendOperator()
	q.negateIfNeeded("")
	q.where = append(q.where, qtoken{kind: kindTrue})
}

// simple adds "field op $p" (with the pending negation and operator).
func (q *Query) simple(op, field string, value any) *Query {
	if !q.noRaw("where") {
		return q
	}
	field = queryField(field)
	q.appendOperator()
	q.negateIfNeeded(field)
	q.where = append(q.where, qtoken{kind: kindWhere, op: op, field: field, param: q.addParam(value)})
	return q
}

// WhereEquals matches documents whose field equals value (case-insensitive
// for strings; see Exact). The field "id" (or "ID", "Id") is the document
// id: id().
func (q *Query) WhereEquals(field string, value any) *Query {
	if !q.noRaw("WhereEquals") {
		return q
	}
	if q.negate {
		q.negate = false
		return q.WhereNotEquals(field, value)
	}
	field = queryField(field)
	q.appendOperator()
	q.where = append(q.where, qtoken{kind: kindWhere, op: "=", field: field, param: q.addParam(queryValue(value))})
	return q
}

// WhereNotEquals matches documents whose field differs from value.
func (q *Query) WhereNotEquals(field string, value any) *Query {
	if !q.noRaw("WhereNotEquals") {
		return q
	}
	if q.negate {
		q.negate = false
		return q.WhereEquals(field, value)
	}
	q.appendOperator()
	field = queryField(field)
	q.where = append(q.where, qtoken{kind: kindWhere, op: "!=", field: field, param: q.addParam(queryValue(value))})
	return q
}

// rangeValue is the parameter of a range bound: nil becomes "*" (no lower
// bound) or "NULL" (no upper bound), as the npm client sends them.
func rangeValue(v any, nilAs string) any {
	if v == nil {
		return nilAs
	}
	return queryValue(v)
}

// WhereGreaterThan matches field > value.
func (q *Query) WhereGreaterThan(field string, value any) *Query {
	return q.simple(">", field, rangeValue(value, "*"))
}

// WhereGreaterThanOrEqual matches field >= value.
func (q *Query) WhereGreaterThanOrEqual(field string, value any) *Query {
	return q.simple(">=", field, rangeValue(value, "*"))
}

// WhereLessThan matches field < value.
func (q *Query) WhereLessThan(field string, value any) *Query {
	return q.simple("<", field, rangeValue(value, "NULL"))
}

// WhereLessThanOrEqual matches field <= value.
func (q *Query) WhereLessThanOrEqual(field string, value any) *Query {
	return q.simple("<=", field, rangeValue(value, "NULL"))
}

// WhereBetween matches from <= field <= to.
func (q *Query) WhereBetween(field string, from, to any) *Query {
	if !q.noRaw("WhereBetween") {
		return q
	}
	field = queryField(field)
	q.appendOperator()
	q.negateIfNeeded(field)
	p1 := q.addParam(rangeValue(from, "*"))
	p2 := q.addParam(rangeValue(to, "NULL"))
	q.where = append(q.where, qtoken{kind: kindWhere, op: "between", field: field, param: p1, param2: p2})
	return q
}

// WhereIn matches documents whose field equals one of values (a slice).
func (q *Query) WhereIn(field string, values any) *Query {
	return q.simple("in", field, flatten(values))
}

// ContainsAny matches documents whose array field holds one of values.
func (q *Query) ContainsAny(field string, values any) *Query {
	return q.simple("in", field, flatten(values))
}

// ContainsAll matches documents whose array field holds every one of values
// (no values: every document).
func (q *Query) ContainsAll(field string, values any) *Query {
	if !q.noRaw("ContainsAll") {
		return q
	}
	field = queryField(field)
	q.appendOperator()
	q.negateIfNeeded(field)
	list := flatten(values)
	if len(list) == 0 {
		q.where = append(q.where, qtoken{kind: kindTrue})
		return q
	}
	q.where = append(q.where, qtoken{kind: kindWhere, op: "all in", field: field, param: q.addParam(list)})
	return q
}

// WhereStartsWith matches strings that start with prefix.
func (q *Query) WhereStartsWith(field string, prefix any) *Query {
	return q.simple("startsWith", field, queryValue(prefix))
}

// WhereEndsWith matches strings that end with suffix.
func (q *Query) WhereEndsWith(field string, suffix any) *Query {
	return q.simple("endsWith", field, queryValue(suffix))
}

// WhereRegex matches strings against a regular expression.
func (q *Query) WhereRegex(field, pattern string) *Query {
	return q.simple("regex", field, pattern)
}

// WhereExists matches documents that have the field (whatever its value).
func (q *Query) WhereExists(field string) *Query {
	if !q.noRaw("WhereExists") {
		return q
	}
	field = queryField(field)
	q.appendOperator()
	q.negateIfNeeded("")
	q.where = append(q.where, qtoken{kind: kindWhere, op: "exists", field: field})
	return q
}

// Search is a full-text search of terms in field: documents with any of
// the terms, or with all of them when op is SearchAnd. Clauses after a
// search are joined with "or" unless AndAlso is called.
func (q *Query) Search(field, terms string, op ...SearchOperator) *Query {
	if !q.noRaw("Search") {
		return q
	}
	so := SearchOr
	if len(op) > 0 && op[0] != "" {
		so = op[0]
	}
	q.appendOperator()
	field = queryField(field)
	q.negateIfNeeded(field)
	q.where = append(q.where, qtoken{kind: kindWhere, op: "search", field: field, param: q.addParam(terms), search: so})
	return q
}

// Exact makes the last where clause case-sensitive: exact(Name = $p0).
func (q *Query) Exact() *Query {
	if t := q.lastWhere("Exact"); t != nil {
		t.exact = true
	}
	return q
}

// Boost weighs the last where clause: boost(Name = $p0, 2).
func (q *Query) Boost(factor float64) *Query {
	if t := q.lastWhere("Boost"); t != nil {
		t.boost = &factor
	}
	return q
}

func (q *Query) lastWhere(what string) *qtoken {
	if len(q.where) == 0 || q.where[len(q.where)-1].kind != kindWhere {
		q.fail(fmt.Errorf("rookery: %s must follow a where clause", what))
		return nil
	}
	return &q.where[len(q.where)-1]
}

// Not negates the next where clause or subclause.
func (q *Query) Not() *Query {
	q.negate = !q.negate
	return q
}

// AndAlso joins the previous and the next clause with "and" (the default).
func (q *Query) AndAlso() *Query {
	return q.operator(kindAnd, "AndAlso")
}

// OrElse joins the previous and the next clause with "or".
func (q *Query) OrElse() *Query {
	return q.operator(kindOr, "OrElse")
}

func (q *Query) operator(k qkind, what string) *Query {
	if len(q.where) == 0 {
		return q
	}
	if last := q.where[len(q.where)-1].kind; last == kindAnd || last == kindOr {
		return q.fail(fmt.Errorf("rookery: %s after an operator", what))
	}
	q.where = append(q.where, qtoken{kind: k})
	return q
}

// OpenSubclause opens a parenthesised group of clauses.
func (q *Query) OpenSubclause() *Query {
	if !q.noRaw("OpenSubclause") {
		return q
	}
	q.depth++
	q.appendOperator()
	q.negateIfNeeded("")
	q.where = append(q.where, qtoken{kind: kindOpen})
	return q
}

// CloseSubclause closes the group opened last.
func (q *Query) CloseSubclause() *Query {
	q.depth--
	q.where = append(q.where, qtoken{kind: kindClose})
	return q
}

// OrderBy sorts ascending by field, compared as ordering (strings when
// omitted).
func (q *Query) OrderBy(field string, ordering ...OrderingType) *Query {
	return q.order(field, false, ordering)
}

// OrderByDescending sorts descending by field.
func (q *Query) OrderByDescending(field string, ordering ...OrderingType) *Query {
	return q.order(field, true, ordering)
}

func (q *Query) order(field string, desc bool, ordering []OrderingType) *Query {
	if !q.noRaw("OrderBy") {
		return q
	}
	o := OrderingString
	if len(ordering) > 0 && ordering[0] != "" {
		o = ordering[0]
	}
	q.orderBy = append(q.orderBy, orderToken{field: queryField(field), desc: desc, ordering: o})
	return q
}

// Skip skips the first n results.
func (q *Query) Skip(n int) *Query {
	q.start = &n
	return q
}

// Take returns at most n results.
func (q *Query) Take(n int) *Query {
	q.pageSize = &n
	return q
}

// SelectFields projects each result to the given fields (results are not
// tracked entities).
func (q *Query) SelectFields(fields ...string) *Query {
	if !q.noRaw("SelectFields") {
		return q
	}
	if q.fields {
		return q.fail(errors.New("rookery: SelectFields was already called"))
	}
	if len(fields) == 0 {
		return q.fail(errors.New("rookery: SelectFields needs fields"))
	}
	q.fields = true
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		writeField(&b, f)
	}
	// As the npm client: the nested object types come along, for typed projections.
	b.WriteString(", @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__")
	q.selects = append(q.selects, selectToken{text: b.String()})
	return q
}

// Distinct returns each distinct projected result once.
func (q *Query) Distinct() *Query {
	if !q.noRaw("Distinct") {
		return q
	}
	if q.distinct {
		return q.fail(errors.New("rookery: the query is already distinct"))
	}
	q.distinct = true
	return q
}

// Include asks the server to send the documents whose ids are at the given
// paths of the results; loading them afterwards needs no request.
func (q *Query) Include(paths ...string) *Query {
	for _, p := range paths {
		if p != "" && !contains(q.includes, p) {
			q.includes = append(q.includes, p)
		}
	}
	return q
}

// GroupBy groups the results of a dynamic query by fields; select what to
// return with SelectKey, SelectCount and SelectSum.
func (q *Query) GroupBy(fields ...string) *Query {
	if !q.noRaw("GroupBy") {
		return q
	}
	if q.collection == "" {
		return q.fail(errors.New("rookery: GroupBy only works with dynamic queries"))
	}
	q.isGroup = true
	for _, f := range fields {
		q.groupBy = append(q.groupBy, queryField(f))
	}
	return q
}

// SelectKey returns the group key (its fields under their own names).
func (q *Query) SelectKey() *Query {
	return q.SelectKeyAs("", "")
}

// SelectKeyAs returns a field of the group key under projectedName.
func (q *Query) SelectKeyAs(field, projectedName string) *Query {
	if !q.noRaw("SelectKey") {
		return q
	}
	var b strings.Builder
	if field == "" {
		field = "key()"
	}
	writeField(&b, field)
	if projectedName != "" && projectedName != field {
		b.WriteString(" as '")
		b.WriteString(projectedName)
		b.WriteString("'")
	}
	q.selects = append(q.selects, selectToken{text: b.String()})
	return q
}

// SelectCount returns the number of documents of each group, as "count"
// unless projectedName is given.
func (q *Query) SelectCount(projectedName ...string) *Query {
	if !q.noRaw("SelectCount") {
		return q
	}
	name := "count"
	if len(projectedName) > 0 && projectedName[0] != "" {
		name = projectedName[0]
	}
	q.selects = append(q.selects, selectToken{text: "count() as " + name})
	return q
}

// SelectSum returns the sum of field in each group, as projectedName (the
// field's own name when "").
func (q *Query) SelectSum(field, projectedName string) *Query {
	if !q.noRaw("SelectSum") {
		return q
	}
	if field == "" {
		return q.fail(errors.New("rookery: SelectSum needs a field"))
	}
	text := "sum(" + escapeField(field) + ")"
	if projectedName != "" {
		text += " as " + projectedName
	}
	q.selects = append(q.selects, selectToken{text: text})
	return q
}

// WaitForNonStaleResults makes the server wait until the index has caught
// up with every write made before the query, for at most timeout
// (DefaultWaitForNonStaleResultsTimeout when 0).
func (q *Query) WaitForNonStaleResults(timeout time.Duration) *Query {
	if q.wait {
		if timeout > q.waitTimeout {
			q.waitTimeout = timeout
		}
		return q
	}
	q.wait = true
	q.waitTimeout = timeout
	if timeout <= 0 {
		q.waitTimeout = DefaultWaitForNonStaleResultsTimeout
	}
	return q
}

// Statistics makes the query fill stats when it runs.
func (q *Query) Statistics(stats *QueryStatistics) *Query {
	q.stats = stats
	return q
}

// NoCaching bypasses the HTTP cache for this query.
func (q *Query) NoCaching() *Query {
	q.noCaching = true
	return q
}

// IndexQuery is a query as sent to the server: the RQL text, its
// parameters and the wait for non-stale results. Its JSON is the body of
// POST /queries (and of delete by query).
type IndexQuery struct {
	Query                         string
	QueryParameters               map[string]any
	WaitForNonStaleResults        bool
	WaitForNonStaleResultsTimeout time.Duration // sent in milliseconds, as the npm client does
	DisableCaching                bool
}

// MarshalJSON writes the query in the npm client's field order.
func (iq IndexQuery) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"Query":`)
	if err := encodeJS(&b, iq.Query); err != nil {
		return nil, err
	}
	if iq.WaitForNonStaleResults {
		b.WriteString(`,"WaitForNonStaleResults":true`)
	}
	if iq.WaitForNonStaleResults || iq.WaitForNonStaleResultsTimeout > 0 {
		b.WriteString(`,"WaitForNonStaleResultsTimeout":`)
		b.WriteString(strconv.FormatInt(iq.WaitForNonStaleResultsTimeout.Milliseconds(), 10))
	}
	if iq.DisableCaching {
		b.WriteString(`,"DisableCaching":true`)
	}
	b.WriteString(`,"QueryParameters":`)
	params := iq.QueryParameters
	if params == nil {
		params = map[string]any{}
	}
	if err := encodeJS(&b, params); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encodeJS writes v as JSON without escaping <, > and & (as JavaScript's
// JSON.stringify).
func encodeJS(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// IndexQuery renders the query: the RQL and the parameters the server will
// get. Each call renders afresh (paging parameters are added at the end).
func (q *Query) IndexQuery() (IndexQuery, error) {
	if q.err != nil {
		return IndexQuery{}, q.err
	}
	// Paging adds parameters: render on a copy so the query can run again.
	c := *q
	c.params = make(map[string]any, len(q.params)+2)
	for k, v := range q.params {
		c.params[k] = v
	}
	text, err := c.rql()
	if err != nil {
		return IndexQuery{}, err
	}
	return IndexQuery{
		Query:                         text,
		QueryParameters:               c.params,
		WaitForNonStaleResults:        q.wait,
		WaitForNonStaleResultsTimeout: q.waitTimeout,
	}, nil
}

// String is the RQL text of the query (or the error that prevents it).
func (q *Query) String() string {
	iq, err := q.IndexQuery()
	if err != nil {
		return "error: " + err.Error()
	}
	return iq.Query
}

func (q *Query) rql() (string, error) {
	var b strings.Builder
	if q.isRaw {
		b.WriteString(q.raw)
		q.writePaging(&b)
		return b.String(), nil
	}
	if q.depth != 0 {
		return "", fmt.Errorf("rookery: a subclause was not closed (depth %d)", q.depth)
	}
	if q.negate {
		return "", errors.New("rookery: Not must be followed by a where clause")
	}
	if n := len(q.where); n > 0 && (q.where[n-1].kind == kindAnd || q.where[n-1].kind == kindOr) {
		return "", errors.New("rookery: the where clause ends with an operator")
	}
	switch {
	case q.collection != "":
		b.WriteString("from '")
		b.WriteString(escapeString(q.collection))
		b.WriteString("'")
	case q.index != "":
		b.WriteString("from index '")
		b.WriteString(q.index)
		b.WriteString("'")
	default:
		return "", errors.New("rookery: a query needs a collection or an index")
	}
	if len(q.groupBy) > 0 {
		b.WriteString(" group by ")
		for i, f := range q.groupBy {
			if i > 0 {
				b.WriteString(", ")
			}
			writeField(&b, f)
		}
	}
	if len(q.where) > 0 {
		b.WriteString(" where ")
		for i, t := range q.where {
			if i > 0 && q.where[i-1].kind != kindOpen && t.kind != kindClose {
				b.WriteByte(' ')
			}
			t.writeTo(&b)
		}
	}
	if len(q.orderBy) > 0 {
		b.WriteString(" order by ")
		for i, o := range q.orderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			writeField(&b, o.field)
			switch o.ordering {
			case OrderingLong:
				b.WriteString(" as long")
			case OrderingDouble:
				b.WriteString(" as double")
			case OrderingAlphaNumeric:
				b.WriteString(" as alphaNumeric")
			}
			if o.desc {
				b.WriteString(" desc")
			}
		}
	}
	if q.distinct || len(q.selects) > 0 {
		b.WriteString(" select ")
		if q.distinct {
			b.WriteString("distinct")
			if len(q.selects) == 0 {
				b.WriteString(" *")
			} else {
				b.WriteByte(' ')
			}
		}
		for i, s := range q.selects {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.text)
		}
	}
	if len(q.includes) > 0 {
		b.WriteString(" include ")
		for i, p := range q.includes {
			if i > 0 {
				b.WriteByte(',')
			}
			if includeNeedsQuotes(p) {
				b.WriteByte('\'')
				b.WriteString(strings.ReplaceAll(p, "'", `\'`))
				b.WriteByte('\'')
			} else {
				b.WriteString(p)
			}
		}
	}
	q.writePaging(&b)
	return b.String(), nil
}

// writePaging appends "limit $offset, $count" when Skip or Take was called
// (an offset never set is sent as null).
func (q *Query) writePaging(b *strings.Builder) {
	if (q.start != nil && *q.start > 0) || q.pageSize != nil {
		var start, size any
		if q.start != nil {
			start = *q.start
		}
		if q.pageSize != nil {
			size = *q.pageSize
		}
		b.WriteString(" limit $")
		b.WriteString(q.addParam(start))
		b.WriteString(", $")
		b.WriteString(q.addParam(size))
	}
}

func (t qtoken) writeTo(b *strings.Builder) {
	switch t.kind {
	case kindOpen:
		b.WriteByte('(')
		return
	case kindClose:
		b.WriteByte(')')
		return
	case kindAnd:
		b.WriteString("and")
		return
	case kindOr:
		b.WriteString("or")
		return
	case kindNot:
		b.WriteString("not")
		return
	case kindTrue:
		b.WriteString("true")
		return
	}
	if t.boost != nil {
		b.WriteString("boost(")
	}
	if t.exact {
		b.WriteString("exact(")
	}
	switch t.op {
	case "startsWith", "endsWith", "regex", "search":
		b.WriteString(t.op)
		b.WriteByte('(')
		writeField(b, t.field)
		b.WriteString(", $")
		b.WriteString(t.param)
		if t.op == "search" && t.search == SearchAnd {
			b.WriteString(", and")
		}
		b.WriteByte(')')
	case "exists":
		b.WriteString("exists(")
		writeField(b, t.field)
		b.WriteByte(')')
	case "in", "all in":
		writeField(b, t.field)
		b.WriteString(" " + t.op + " ($")
		b.WriteString(t.param)
		b.WriteByte(')')
	case "between":
		writeField(b, t.field)
		b.WriteString(" between $")
		b.WriteString(t.param)
		b.WriteString(" and $")
		b.WriteString(t.param2)
	default:
		writeField(b, t.field)
		b.WriteString(" " + t.op + " $")
		b.WriteString(t.param)
	}
	if t.exact {
		b.WriteByte(')')
	}
	if t.boost != nil {
		b.WriteString(", ")
		b.WriteString(strconv.FormatFloat(*t.boost, 'f', -1, 64))
		b.WriteByte(')')
	}
}

// rqlKeywords are quoted when used as field names.
var rqlKeywords = map[string]bool{"as": true, "select": true, "where": true, "load": true, "group": true, "order": true, "include": true, "filter": true}

func writeField(b *strings.Builder, f string) {
	if rqlKeywords[f] {
		b.WriteByte('\'')
		b.WriteString(f)
		b.WriteByte('\'')
		return
	}
	b.WriteString(f)
}

// queryField maps "id" to id() and quotes field names that are not plain
// identifiers or dotted paths ('First Name').
func queryField(f string) string {
	switch f {
	case "id", "Id", "ID":
		return "id()"
	}
	return escapeField(f)
}

func escapeField(f string) string {
	switch f {
	case "", "id()", "key()", "hash(key())", "spatial(shape)":
		return f
	}
	if !fieldNeedsQuotes(f) {
		return f
	}
	return "'" + f + "'"
}

func fieldNeedsQuotes(s string) bool {
	inQuotes := false
	for i, c := range []rune(s) {
		if c == '\'' || c == '"' {
			inQuotes = !inQuotes
			continue
		}
		if inQuotes {
			continue
		}
		if i == 0 {
			if !unicode.IsLetter(c) && c != '_' && c != '@' {
				return true
			}
			continue
		}
		if !unicode.IsLetter(c) && !isASCIIDigit(c) && !strings.ContainsRune("_-@.[]", c) {
			return true
		}
	}
	return inQuotes
}

func isASCIIDigit(c rune) bool { return c >= '0' && c <= '9' }

func includeNeedsQuotes(p string) bool {
	for _, c := range p {
		if !unicode.IsLetter(c) && !isASCIIDigit(c) && c != '_' && c != '.' {
			return true
		}
	}
	return false
}

// escapeString escapes a collection name inside single quotes as the npm
// client does: JSON string escapes, then \' for quotes.
func escapeString(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	var b bytes.Buffer
	_ = encodeJS(&b, s)
	inner := b.String()
	inner = inner[1 : len(inner)-1]
	// JSON.stringify leaves U+2028/U+2029 as they are.
	inner = strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(inner)
	return strings.ReplaceAll(inner, "'", `\'`)
}
