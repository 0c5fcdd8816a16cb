package query

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// The property test: random RQL over random documents, answered through the
// runner (auto indexes), against the rql evaluator scanning the collection;
// again after updates and deletes, and after closing and reopening the
// database and its indexes.

var (
	propNames  = []string{"Alice", "alice", "Bob", "CAROL", "dave", "Eve", "", "Zed"}
	propWords  = []string{"red", "pipe", "blue", "tube", "green", "steel"}
	propTags   = []string{"a", "b", "c", "d"}
	propCities = []string{"London", "london", "Paris", "Rome"}
)

func randDoc(rng *rand.Rand) string {
	m := map[string]any{
		"Name": propNames[rng.IntN(len(propNames))],
		"Age":  rng.IntN(20),
	}
	if rng.IntN(5) > 0 {
		m["Score"] = float64(rng.IntN(1000)) / 10
	}
	// Rank has every type, so ranges on numbers must keep out text, null,
	// booleans and arrays of text.
	switch rng.IntN(6) {
	case 0:
		m["Rank"] = fmt.Sprint(rng.IntN(20))
	case 1:
		m["Rank"] = nil
	case 2:
		m["Rank"] = rng.IntN(2) == 0
	case 3:
		m["Rank"] = []any{fmt.Sprint(rng.IntN(20)), rng.IntN(20)}
	default:
		m["Rank"] = rng.IntN(20)
	}
	if rng.IntN(4) > 0 {
		tags := []any{}
		for i := rng.IntN(4); i > 0; i-- {
			tags = append(tags, propTags[rng.IntN(len(propTags))])
		}
		m["Tags"] = tags
	}
	if rng.IntN(4) > 0 {
		m["Address"] = map[string]any{"City": propCities[rng.IntN(len(propCities))]}
	}
	if rng.IntN(3) > 0 {
		var ws []string
		for i := rng.IntN(3) + 1; i > 0; i-- {
			ws = append(ws, propWords[rng.IntN(len(propWords))])
		}
		m["Title"] = strings.Join(ws, " ")
	}
	if rng.IntN(3) == 0 {
		m["Lines"] = []any{map[string]any{"Price": rng.IntN(50)}, map[string]any{"Price": rng.IntN(50)}}
	}
	m["@metadata"] = map[string]any{"@collection": "People"}
	b, _ := json.Marshal(m)
	return string(b)
}

// gen builds random where clauses with their parameters.
type gen struct {
	rng    *rand.Rand
	params map[string]any
}

func (g *gen) param(v any) string {
	name := fmt.Sprintf("p%d", len(g.params))
	g.params[name] = v
	return "$" + name
}

func (g *gen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *gen) leaf() string {
	ops := []string{"=", "!=", "<", "<=", ">", ">="}
	switch g.rng.IntN(15) {
	case 12:
		return fmt.Sprintf("Rank between %d and %d", g.rng.IntN(10), 5+g.rng.IntN(15))
	case 13:
		return "Rank " + g.pick(ops) + " " + g.param(float64(g.rng.IntN(22)))
	case 0:
		return "Name " + g.pick(ops) + " " + g.param(g.pick(propNames))
	case 1:
		return "Age " + g.pick(ops) + " " + g.param(float64(g.rng.IntN(22)))
	case 2:
		return fmt.Sprintf("Score %s %d.5", g.pick(ops), g.rng.IntN(100))
	case 3:
		return fmt.Sprintf("Age between %d and %d", g.rng.IntN(10), 5+g.rng.IntN(15))
	case 4:
		return "Name in (" + g.param([]any{g.pick(propNames), g.pick(propNames)}) + ")"
	case 5:
		return "Tags all in (" + g.param([]any{g.pick(propTags), g.pick(propTags)}) + ")"
	case 6:
		return "Tags in (" + g.param(g.pick(propTags)) + ", '" + g.pick(propTags) + "')"
	case 7:
		prefix := strings.ToLower(g.pick(propNames))
		return "startsWith(Name, " + g.param(prefix[:min(1+g.rng.IntN(2), len(prefix))]) + ")"
	case 8:
		op := g.pick([]string{"", ", and", ", or"})
		return "search(Title, " + g.param(g.pick(propWords)+" "+g.pick(propWords)) + op + ")"
	case 9:
		return "exists(" + g.pick([]string{"Score", "Tags", "Address.City", "Title"}) + ")"
	case 10:
		return "Address.City = " + g.param(g.pick(propCities))
	case 11:
		return "exact(Name = " + g.param(g.pick(propNames)) + ")"
	default:
		return fmt.Sprintf("Lines[].Price %s %d", g.pick(ops), g.rng.IntN(50))
	}
}

func (g *gen) where(depth int) string {
	if depth <= 0 || g.rng.IntN(3) == 0 {
		return g.leaf()
	}
	switch g.rng.IntN(4) {
	case 0:
		return "(" + g.where(depth-1) + " and " + g.where(depth-1) + ")"
	case 1:
		return "(" + g.where(depth-1) + " or " + g.where(depth-1) + ")"
	case 2:
		return "not (" + g.where(depth-1) + ")"
	}
	return g.where(depth-1) + " and " + g.where(depth-1)
}

// orderKey is one order by item the test checks the results against:
// fields every document has, with one type each.
type orderKey struct {
	field, as string
	desc      bool
}

var propOrders = []orderKey{{"Age", "long", false}, {"Age", "long", true}, {"Name", "", false}, {"Name", "string", true}}

type propDoc struct {
	id   string
	body map[string]any
}

// expected scans the collection with the evaluator.
func expected(t *testing.T, db *storage.DB, q *rql.Query, params map[string]any) map[string]propDoc {
	out := map[string]propDoc{}
	err := db.ScanCollection(context.Background(), "People", 0, 1<<30, func(d *storage.Document) error {
		var body map[string]any
		if err := json.Unmarshal(d.Body, &body); err != nil {
			return err
		}
		ok, err := q.Match(rql.Doc{ID: d.ID, Body: body}, params)
		if err != nil {
			return err
		}
		if ok {
			out[d.ID] = propDoc{d.ID, body}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cmpKey(a, b map[string]any, keys []orderKey) int {
	for _, k := range keys {
		c := 0
		switch k.as {
		case "long":
			x, y := a[k.field].(float64), b[k.field].(float64)
			switch {
			case x < y:
				c = -1
			case x > y:
				c = 1
			}
		default:
			c = strings.Compare(strings.ToLower(a[k.field].(string)), strings.ToLower(b[k.field].(string)))
		}
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func TestPropertyIndexMatchesEvaluator(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	n := newNode(t, Options{})
	const docs = 150
	write := func(i int) { putDoc(t, n.db, fmt.Sprintf("people/%d", i), randDoc(rng)) }
	for i := 0; i < docs; i++ {
		write(i)
	}
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	check := func(phase string) {
		for r := 0; r < rounds; r++ {
			g := &gen{rng: rng, params: map[string]any{}}
			text := "from People where " + g.where(3)
			var keys []orderKey
			if rng.IntN(2) == 0 {
				keys = append(keys, propOrders[rng.IntN(len(propOrders))])
				if rng.IntN(2) == 0 {
					keys = append(keys, propOrders[rng.IntN(len(propOrders))])
				}
				var items []string
				for _, k := range keys {
					s := k.field
					if k.as != "" {
						s += " as " + k.as
					}
					if k.desc {
						s += " desc"
					}
					items = append(items, s)
				}
				text += " order by " + strings.Join(items, ", ")
			}
			q, err := rql.Parse(text)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			want := expected(t, n.db, q, g.params)
			res := n.query(text, g.params)
			if !strings.HasPrefix(res.IndexName, "Auto/People/By") || res.IsStale {
				t.Fatalf("%s: served by %q stale %v", text, res.IndexName, res.IsStale)
			}
			got := ids(t, res)
			if int(res.TotalResults) != len(want) || len(got) != len(want) {
				t.Fatalf("%s %s (%s): %d results (total %d), the evaluator finds %d\n got %v\nwant %v", phase, text, js(g.params), len(got), res.TotalResults, len(want), sorted(got), sortedKeys(want))
			}
			var bodies []map[string]any
			for _, id := range got {
				d, ok := want[id]
				if !ok {
					t.Fatalf("%s %s (%s): %s is not a match", phase, text, js(g.params), id)
				}
				bodies = append(bodies, d.body)
			}
			for i := 1; i < len(bodies) && len(keys) > 0; i++ {
				if cmpKey(bodies[i-1], bodies[i], keys) > 0 {
					t.Fatalf("%s %s: out of order at %d: %v then %v", phase, text, i, bodies[i-1], bodies[i])
				}
			}
			// A page is the same slice of the same order.
			skip, take := rng.IntN(len(got)+2), rng.IntN(10)
			g.params["skip"], g.params["take"] = float64(skip), float64(take)
			page := n.query(text+" limit $skip, $take", g.params)
			wantPage := got[min(skip, len(got)):min(skip+take, len(got))]
			if strings.Join(ids(t, page), " ") != strings.Join(wantPage, " ") || page.TotalResults != res.TotalResults {
				t.Fatalf("%s %s limit %d, %d: %v (total %d), want %v", phase, text, skip, take, ids(t, page), page.TotalResults, wantPage)
			}
		}
	}
	check("fresh")
	for i := 0; i < 60; i++ {
		switch rng.IntN(3) {
		case 0:
			deleteDoc(t, n.db, fmt.Sprintf("people/%d", rng.IntN(docs)))
		default:
			write(rng.IntN(docs + 20))
		}
	}
	check("after writes")
	n.restart()
	for i := 0; i < 30; i++ {
		if rng.IntN(2) == 0 {
			deleteDoc(t, n.db, fmt.Sprintf("people/%d", rng.IntN(docs)))
		} else {
			write(rng.IntN(docs + 20))
		}
	}
	check("after restart")
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys(m map[string]propDoc) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
