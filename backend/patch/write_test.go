package patch

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// put() and del() reach the environment with their change vectors, return
// what it says, and are recorded in Actions with load().
func TestPatchPutDelAndActions(t *testing.T) {
	puts := map[string]string{}
	var cvs []string
	var deleted []string
	var acts Actions
	var out []string
	env := Env{
		Args: map[string]any{"n": 2, "who": map[string]any{"Name": "Ann"}},
		Load: func(id string) ([]byte, error) {
			if id == "people/1" {
				return []byte(`{"Name":"Ann","@metadata":{"@id":"people/1"}}`), nil
			}
			return nil, nil
		},
		Put: func(id string, doc []byte, cv *string) (string, error) {
			puts[id] = string(doc)
			if cv != nil {
				cvs = append(cvs, *cv)
			}
			if strings.HasSuffix(id, "/") {
				return id + "0000000000000000001-A", nil
			}
			return id, nil
		},
		Delete: func(id string, cv *string) (bool, error) {
			deleted = append(deleted, id)
			return id == "old/1", nil
		},
		Output:  func(s string) { out = append(out, s) },
		Actions: &acts,
	}
	m, changed := run(t, `
		var both = load(['people/1', 'people/2']);
		this.Names = both.map(function (p) { return p ? p.Name : null; });
		this.Gen = put('logs/', {N: args.n, Who: args.who.Name});
		put('logs/x', {N: 1}, 'A:1-abc');
		this.Del = [del('old/1'), del('old/2', 'A:2-def')];
		output('done', args.n);
	`, "", order, env)
	if !changed || m["Gen"] != "logs/0000000000000000001-A" {
		t.Fatalf("patched %v", m)
	}
	if names := m["Names"].([]any); names[0] != "Ann" || names[1] != nil {
		t.Fatalf("load([ids]) %v", names)
	}
	if d := m["Del"].([]any); d[0] != true || d[1] != false {
		t.Fatalf("del() results %v", d)
	}
	if puts["logs/"] != `{"N":2,"Who":"Ann"}` || len(cvs) != 1 || cvs[0] != "A:1-abc" {
		t.Fatalf("puts %v cvs %v", puts, cvs)
	}
	if strings.Join(deleted, ",") != "old/1,old/2" {
		t.Fatalf("deleted %v", deleted)
	}
	if strings.Join(acts.LoadDocument, ",") != "people/1,people/2" || strings.Join(acts.PutDocument, ",") != "logs/0000000000000000001-A,logs/x" || strings.Join(acts.DeleteDocument, ",") != "old/1,old/2" {
		t.Fatalf("actions %+v", acts)
	}
	if strings.Join(out, "|") != "done 2" {
		t.Fatalf("output %q", out)
	}
}

// Without Put and Delete (an export transform), put() and del() throw;
// past MaxWrites the run fails; an environment's error keeps its kind.
func TestPatchWriteLimits(t *testing.T) {
	s, err := Compile("put('a', {})", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Run([]byte(order), Env{}); !IsError(err) || !strings.Contains(err.Error(), "put() is not available") {
		t.Fatalf("put without Put: %v", err)
	}
	s, _ = Compile("for (var i = 0; i < 10; i++) { del('x/' + i) }", "")
	n := 0
	_, _, err = s.Run([]byte(order), Env{MaxWrites: 3, Delete: func(string, *string) (bool, error) { n++; return true, nil }})
	if !IsError(err) || !strings.Contains(err.Error(), "more than 3 times") || n != 3 {
		t.Fatalf("write bound: %v after %d", err, n)
	}
	boom := errors.New("concurrency")
	_, _, err = s.Run([]byte(order), Env{Delete: func(string, *string) (bool, error) { return false, boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("the environment's error was not kept: %v", err)
	}
	// A script that catches it goes on.
	s, _ = Compile("try { del('x') } catch (e) { this.Caught = true }", "")
	m, _, err := s.Run([]byte(order), Env{Delete: func(string, *string) (bool, error) { return false, boom }})
	if err != nil || !strings.Contains(string(m), `"Caught":true`) {
		t.Fatalf("caught: %s %v", m, err)
	}
}

// A request's deadline cuts a run shorter than the script's own limit, and
// a run that starts past it fails at once.
func TestPatchDeadline(t *testing.T) {
	s, _ := Compile("while (true) {}", "")
	s.TimeLimit = 10 * time.Second
	start := time.Now()
	_, _, err := s.Run([]byte(order), Env{Deadline: time.Now().Add(50 * time.Millisecond)})
	if !IsError(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("deadline: %v after %s", err, time.Since(start))
	}
	s, _ = Compile("this.X = 1", "")
	if _, _, err := s.Run([]byte(order), Env{Deadline: time.Now().Add(-time.Millisecond)}); !IsError(err) || !strings.Contains(err.Error(), "shared time limit") {
		t.Fatalf("past deadline: %v", err)
	}
}
