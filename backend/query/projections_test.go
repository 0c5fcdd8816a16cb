package query

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rookerydb/rookery/backend/storage"
)

func incCounter(t *testing.T, db *storage.DB, id, name string, delta int64) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.IncrementCounter(id, name, delta)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// decodeResults reads every result as a JSON object (numbers as json.Number).
func decodeResults(t *testing.T, res *Result) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range res.Results {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		out = append(out, m)
	}
	return out
}

func users(t *testing.T, db *storage.DB) {
	putDoc(t, db, "users/1", `{"Name":"Ann","Manager":"mgr/ann","Address":{"Key":"addr/1"},"Keys":["k/1","K/1","k/2"],"@metadata":{"@collection":"Users"}}`)
	putDoc(t, db, "users/2", `{"Name":"Bob","Manager":"mgr/none","@metadata":{"@collection":"Users"}}`)
	incCounter(t, db, "users/1", "Likes", 3)
	incCounter(t, db, "users/1", "likes", 2)
	incCounter(t, db, "users/1", "Views", 10)
}

// select counter()/counterRaw(): the queried document's counter under its
// name or alias, null when the document has none; counterRaw() is the value
// per database copy, keyed as GET /counters?full=true keys it.
func TestCounterProjections(t *testing.T) {
	db := openDB(t, "")
	users(t, db)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})

	res := run(t, r, db, `from Users as u select counter(u, 'Likes')`, nil)
	got := decodeResults(t, res)
	if len(got) != 2 || got[0]["Likes"] != json.Number("5") || got[1]["Likes"] != nil {
		t.Fatalf("%s", res.Results)
	}
	if _, ok := got[1]["Likes"]; !ok {
		t.Fatalf("a missing counter projects null, not nothing: %s", res.Results[1])
	}
	meta, _ := got[0]["@metadata"].(map[string]any)
	if meta["@projection"] != true || meta["@id"] != "users/1" {
		t.Fatalf("metadata %v", meta)
	}

	res = run(t, r, db, `from Users where id() = 'users/1' select Name, counter('views') as v, counterRaw(Likes), counter($c) as byParam`, map[string]any{"c": "LIKES"})
	got = decodeResults(t, res)
	if len(got) != 1 || got[0]["Name"] != "Ann" || got[0]["v"] != json.Number("10") || got[0]["byParam"] != json.Number("5") {
		t.Fatalf("%s", res.Results)
	}
	if !strings.HasPrefix(string(res.Results[0]), `{"Name":"Ann","v":10,"Likes":{`) {
		t.Fatalf("select order: %s", res.Results[0])
	}
	cs, err := db.Counters(context.Background(), "users/1", []string{"Likes"})
	if err != nil || len(cs) != 1 || cs[0] == nil || len(cs[0].Parts) != 1 {
		t.Fatalf("%v %+v", err, cs)
	}
	rawVals, _ := got[0]["Likes"].(map[string]any)
	key := cs[0].Parts[0].ValueKey()
	if len(rawVals) != 1 || rawVals[key] != json.Number("5") || !strings.HasPrefix(key, "A:") {
		t.Fatalf("counterRaw %v, want {%q: 5}", got[0]["Likes"], key)
	}
	res = run(t, r, db, `from Users where id() = 'users/2' select counterRaw('Likes') as raw`, nil)
	if got := decodeResults(t, res); got[0]["raw"] != nil {
		t.Fatalf("%s", res.Results)
	}

	// A counter change moves the result etag (the documents did not change).
	res = run(t, r, db, `from Users as u select counter(u, 'Likes')`, nil)
	before := res.ResultEtag
	if again := run(t, r, db, `from Users as u select counter(u, 'Likes')`, nil); again.ResultEtag != before {
		t.Fatal("the etag moved without a change")
	}
	incCounter(t, db, "users/1", "Likes", 1)
	res = run(t, r, db, `from Users as u select counter(u, 'Likes')`, nil)
	if res.ResultEtag == before || decodeResults(t, res)[0]["Likes"] != json.Number("6") {
		t.Fatalf("etag %d (was %d): %s", res.ResultEtag, before, res.Results)
	}

	// Streams project counters too.
	var streamed []string
	if _, err := r.Stream(context.Background(), db, Request{Query: `from Users select counter('Views')`}, func(raw json.RawMessage) error {
		streamed = append(streamed, string(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(streamed) != 2 || !strings.HasPrefix(streamed[0], `{"Views":10,`) || !strings.HasPrefix(streamed[1], `{"Views":null,`) {
		t.Fatalf("%q", streamed)
	}

	for _, c := range []struct {
		q      string
		params map[string]any
		msg    string
	}{
		{`from Users select counter($c)`, nil, "$c, which has no value"},
		{`from Users select counter($c)`, map[string]any{"c": 3.0}, "counter name as a string"},
		{`from Users select counterRaw($c)`, map[string]any{"c": " "}, "cannot be empty"},
		{`from Users select counter('` + strings.Repeat("x", storage.MaxCounterNameBytes+1) + `')`, nil, "limit"},
	} {
		_, err := r.Run(context.Background(), db, Request{Query: c.q, QueryParameters: c.params})
		var iq *InvalidQueryError
		if !errors.As(err, &iq) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%.80s: %v, want an InvalidQueryError with %q", c.q, err, c.msg)
		}
	}
}

// A query served by an (auto) index projects counters the same way.
func TestCounterProjectionFromIndex(t *testing.T) {
	n := newNode(t, Options{})
	users(t, n.db)
	res := n.query(`from Users as u where u.Name = 'Ann' select u.Name, counter(u, 'Likes') as likes`, nil)
	if res.IndexName != "Auto/Users/ByName" || len(res.Results) != 1 || !strings.HasPrefix(string(res.Results[0]), `{"Name":"Ann","likes":5,`) {
		t.Fatalf("%s %s", res.IndexName, res.Results)
	}
}

// A map-reduce index's rows are not documents: counter() on them is refused.
func TestCounterProjectionRefusedOnMapReduce(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	res := n.query(`from Orders group by Company select key(), count()`, nil)
	_, err := n.runner.Run(context.Background(), n.db, Request{Query: `from index '` + res.IndexName + `' select counter('Likes')`})
	var iq *InvalidQueryError
	if !errors.As(err, &iq) || !strings.Contains(err.Error(), "are not documents") {
		t.Fatalf("%s: %v", res.IndexName, err)
	}
}

// fakeCmpXchg is a cluster's compare-exchange values for the tests.
type fakeCmpXchg struct {
	mu   sync.Mutex
	vals map[string]CmpXchgValue // lower-cased "db/key"
	asks int
}

func (f *fakeCmpXchg) get(db, key string) (CmpXchgValue, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks++
	v, ok := f.vals[strings.ToLower(db+"/"+key)]
	return v, ok
}

func (f *fakeCmpXchg) put(db, key string, index uint64, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals[strings.ToLower(db+"/"+key)] = CmpXchgValue{Key: key, Index: index, Value: json.RawMessage(value)}
}

// include cmpxchg(path): the values whose keys the results hold at the
// paths, found ones as stored, missing ones with Index -1 and a null Value,
// each key once (case-insensitively).
func TestIncludeCmpXchg(t *testing.T) {
	db := openDB(t, "")
	users(t, db)
	f := &fakeCmpXchg{vals: map[string]CmpXchgValue{}}
	f.put("shop", "mgr/Ann", 7, `{"Object":{"Name":"Boss"}}`)
	f.put("shop", "addr/1", 9, `{"Object":"London","@metadata":{"x":1}}`)
	f.put("shop", "k/1", 11, `{"Object":1}`)
	f.put("other", "k/2", 12, `{"Object":2}`) // another database's
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{CmpXchg: f.get})

	res := run(t, r, db, `from Users as u where id() = 'users/1' include cmpxchg('Manager'), cmpxchg(u.Address.Key), cmpxchg('Keys')`, nil)
	var inc map[string]struct {
		Key   string
		Index int64
		Value json.RawMessage
	}
	if err := json.Unmarshal(res.CompareExchangeValueIncludes, &inc); err != nil {
		t.Fatalf("%s: %v", res.CompareExchangeValueIncludes, err)
	}
	if len(inc) != 4 || inc["mgr/Ann"].Index != 7 || inc["mgr/Ann"].Key != "mgr/Ann" || string(inc["mgr/Ann"].Value) != `{"Object":{"Name":"Boss"}}` ||
		string(inc["addr/1"].Value) != `{"Object":"London","@metadata":{"x":1}}` || inc["k/1"].Index != 11 ||
		inc["k/2"].Index != -1 || string(inc["k/2"].Value) != "null" {
		t.Fatalf("%s", res.CompareExchangeValueIncludes)
	}
	wire, err := json.Marshal(res)
	if err != nil || !strings.Contains(string(wire), `"CompareExchangeValueIncludes":{"mgr/Ann":{"Key":"mgr/Ann","Index":7,"Value":{"Object":{"Name":"Boss"}}}`) {
		t.Fatalf("%v %s", err, wire)
	}
	if res.Includes == nil || len(res.Includes) != 0 {
		t.Fatalf("no documents are included: %v", res.Includes)
	}

	// A projection's results include by their documents' fields.
	res = run(t, r, db, `from Users select Name include cmpxchg('Manager')`, nil)
	if s := string(res.CompareExchangeValueIncludes); s != `{"mgr/Ann":{"Key":"mgr/Ann","Index":7,"Value":{"Object":{"Name":"Boss"}}},"mgr/none":{"Key":"mgr/none","Index":-1,"Value":null}}` {
		t.Fatalf("%s", s)
	}
	// A value change moves the etag; nothing to include is {}.
	before := res.ResultEtag
	f.put("shop", "mgr/Ann", 8, `{"Object":{"Name":"New boss"}}`)
	if res = run(t, r, db, `from Users select Name include cmpxchg('Manager')`, nil); res.ResultEtag == before {
		t.Fatal("a changed value did not move the etag")
	}
	if res = run(t, r, db, `from Users include cmpxchg('Nothing')`, nil); string(res.CompareExchangeValueIncludes) != "{}" {
		t.Fatalf("%s", res.CompareExchangeValueIncludes)
	}
	// Without include cmpxchg() nothing is written; metadataOnly reads none.
	res = run(t, r, db, `from Users`, nil)
	if wire, _ := json.Marshal(res); res.CompareExchangeValueIncludes != nil || strings.Contains(string(wire), "CompareExchange") {
		t.Fatalf("%s", wire)
	}
	asks := f.asks
	res, err = r.Run(context.Background(), db, Request{Query: `from Users include cmpxchg(Manager)`, MetadataOnly: true})
	if err != nil || res.CompareExchangeValueIncludes != nil || f.asks != asks {
		t.Fatalf("%v %s", err, res.CompareExchangeValueIncludes)
	}

	// A node without compare-exchange values refuses the include.
	bare := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	if _, err := bare.Run(context.Background(), db, Request{Query: `from Users include cmpxchg('Manager')`}); err == nil || !strings.Contains(err.Error(), "compare-exchange") {
		t.Fatalf("%v", err)
	}
}

// The keys one answer includes are bounded.
func TestCmpXchgIncludesBound(t *testing.T) {
	var inc CmpXchgIncludes
	keys := make([]any, 0, MaxIncludedCmpXchgValues)
	for i := range MaxIncludedCmpXchgValues {
		keys = append(keys, "k/"+string(rune('a'+i%26))+"/"+strconv.Itoa(i))
	}
	if err := inc.Add(keys...); err != nil || inc.Len() != MaxIncludedCmpXchgValues {
		t.Fatalf("%v %d", err, inc.Len())
	}
	if err := inc.Add("K/A/0"); err != nil { // already there (case-insensitive)
		t.Fatal(err)
	}
	if err := inc.Add("one more"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%v", err)
	}
	if err := inc.Add(3.0, nil, "", strings.Repeat("x", maxCmpXchgKeyBytes+1)); err != nil {
		t.Fatalf("non-keys are skipped, not counted: %v", err)
	}
}
