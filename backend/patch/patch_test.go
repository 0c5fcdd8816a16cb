package patch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, body, alias, doc string, env Env) (map[string]any, bool) {
	t.Helper()
	s, err := Compile(body, alias)
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := s.Run([]byte(doc), env)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, changed
}

const order = `{"Total":10,"Lines":[{"P":1}],"@metadata":{"@id":"orders/1","@collection":"Orders"}}`

// this, the alias, args, id(), getMetadata() and load() work as RavenDB's
// patches use them; an unchanged document is reported as unchanged.
func TestPatchScripts(t *testing.T) {
	m, changed := run(t, "this.Total = this.Total * args.k; this.Lines.push({P: 2}); this.Who = id(this) + '/' + getMetadata(this)['@collection'];", "", order, Env{Args: map[string]any{"k": 3}})
	if !changed || m["Total"].(float64) != 30 || len(m["Lines"].([]any)) != 2 || m["Who"] != "orders/1/Orders" {
		t.Fatalf("patched %v changed=%v", m, changed)
	}
	m, _ = run(t, "o.Flag = true", "o", order, Env{})
	if m["Flag"] != true {
		t.Fatalf("alias %v", m)
	}
	m, _ = run(t, "this.Owner = load('people/1').Name; this.None = load('people/2');", "", order, Env{Load: func(id string) ([]byte, error) {
		if id == "people/1" {
			return []byte(`{"Name":"Ann"}`), nil
		}
		return nil, nil
	}})
	if m["Owner"] != "Ann" || m["None"] != nil {
		t.Fatalf("load %v", m)
	}
	var out []string
	if _, changed := run(t, "output('x', 1); console.log('y'); var unused = this.Total;", "", order, Env{Output: func(s string) { out = append(out, s) }}); changed {
		t.Fatal("a read-only script changed the document")
	}
	if strings.Join(out, "|") != "x 1|y" {
		t.Fatalf("output %q", out)
	}
}

// A script that does not compile, throws or loops forever fails with a
// patch Error; a bad alias is refused.
func TestPatchErrors(t *testing.T) {
	if _, err := Compile("this.x = ", ""); !IsError(err) {
		t.Fatalf("compile: %v", err)
	}
	if _, err := Compile("1", "args"); !IsError(err) {
		t.Fatalf("alias args: %v", err)
	}
	if _, err := Compile("1", "a b"); !IsError(err) {
		t.Fatalf("alias with a space: %v", err)
	}
	s, _ := Compile("throw new Error('nope')", "")
	if _, _, err := s.Run([]byte(order), Env{}); !IsError(err) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("throw: %v", err)
	}
	s, _ = Compile("while (true) {}", "")
	s.TimeLimit = 50 * time.Millisecond
	start := time.Now()
	if _, _, err := s.Run([]byte(order), Env{}); !IsError(err) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("loop: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the loop was not interrupted")
	}
	// The runtime is usable again after an interrupted run.
	s2, _ := Compile("this.After = 1", "")
	if _, changed, err := s2.Run([]byte(order), Env{}); err != nil || !changed {
		t.Fatalf("after interrupt: %v", err)
	}
}

// A pooled runtime does not carry one run's $parameters into the next.
func TestPatchParametersDoNotLeak(t *testing.T) {
	s, err := Compile("this.Seen = typeof $owner === 'undefined' ? null : $owner", "")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := s.Run([]byte(order), Env{Args: map[string]any{"owner": "ann"}})
	if err != nil || !strings.Contains(string(out), `"Seen":"ann"`) {
		t.Fatalf("first run: %s %v", out, err)
	}
	out, _, err = s.Run([]byte(order), Env{})
	if err != nil || !strings.Contains(string(out), `"Seen":null`) {
		t.Fatalf("second run saw the first run's parameter: %s %v", out, err)
	}
}
