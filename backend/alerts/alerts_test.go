package alerts

import "testing"

func TestRaiseDismissClear(t *testing.T) {
	s := New()
	changes := 0
	s.OnChange(func() { changes++ })
	s.Raise(Alert{Key: "identity:db:orders|", Level: Warning, Title: "t", Message: "m1"})
	s.Raise(Alert{Key: "identity:db:orders|", Level: Warning, Title: "t", Message: "m1"}) // same: no change
	s.Raise(Alert{Level: Info, Title: "other", Message: "x"})
	if s.Count() != 2 || changes != 2 {
		t.Fatalf("count %d changes %d", s.Count(), changes)
	}
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m2"})
	list := s.List()
	if len(list) != 2 || list[0].Message != "m2" || list[0].Count != 2 {
		t.Fatalf("list %+v", list)
	}
	if !s.Dismiss(list[0].ID) || s.Dismiss(list[0].ID) {
		t.Fatal("dismiss")
	}
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m3"})
	if s.Count() != 1 {
		t.Fatal("a dismissed key came back before it was cleared")
	}
	s.Clear("identity:db:orders|")
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m4"})
	if s.Count() != 2 {
		t.Fatal("a cleared key must be raisable again")
	}
}

func TestClearDatabase(t *testing.T) {
	s := New()
	s.Raise(Alert{Key: "identity:shop:a|", Database: "shop", Message: "x"})
	s.Raise(Alert{Key: "identity:shop:b|", Database: "shop", Message: "y"})
	s.Raise(Alert{Key: "identity:other:a|", Database: "other", Message: "z"})
	for _, a := range s.List() {
		if a.Key == "identity:shop:a|" {
			s.Dismiss(a.ID) // one of the database's alerts was dismissed
		}
	}
	s.ClearDatabase("SHOP")
	if s.Count() != 1 || s.List()[0].Database != "other" {
		t.Fatalf("left %+v", s.List())
	}
	s.Raise(Alert{Key: "identity:shop:a|", Database: "shop", Message: "x"})
	s.Raise(Alert{Key: "identity:shop:b|", Database: "shop", Message: "y"})
	if s.Count() != 3 {
		t.Fatal("a re-created database must be able to raise its alerts again")
	}
}
