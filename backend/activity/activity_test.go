package activity

import (
	"testing"
	"time"
)

func TestSeriesAndRate(t *testing.T) {
	tr := New()
	if r := tr.Sample("db", 100); r != 0 {
		t.Fatalf("first sample is a baseline, got %v", r)
	}
	tr.Sample("DB", 150)
	tr.Sample("db", 150)
	if r := tr.Rate("db"); r != 0 {
		t.Fatalf("rate %v", r)
	}
	s := tr.Series("db", 10)
	if len(s) != 3 || s[1] != 50 || s[2] != 0 {
		t.Fatalf("series %v", s)
	}
	for i := 0; i < SeriesLength+10; i++ {
		tr.Sample("db", 150+int64(i+1)*2)
	}
	s = tr.Series("db", SeriesLength+50)
	if len(s) != SeriesLength || s[len(s)-1] != 2 {
		t.Fatalf("wrapped series len %d last %v", len(s), s[len(s)-1])
	}
}

func TestHiLoRingNewestFirst(t *testing.T) {
	tr := New()
	for i := 0; i < HiLoRingSize+5; i++ {
		tag := "users"
		if i%2 == 1 {
			tag = "orders"
		}
		tr.RecordHiLo("db", HiLoCall{Time: time.Unix(int64(i), 0), Op: "next", Tag: tag, Low: int64(i)})
	}
	all := tr.HiLoCalls("db", "")
	if len(all) != HiLoRingSize || all[0].Low != HiLoRingSize+4 || all[len(all)-1].Low != 5 {
		t.Fatalf("ring: len %d first %d last %d", len(all), all[0].Low, all[len(all)-1].Low)
	}
	users := tr.HiLoCalls("db", "USERS")
	if len(users) != HiLoRingSize/2 || users[0].Low%2 != 0 {
		t.Fatalf("filter: %d %d", len(users), users[0].Low)
	}
	tr.Forget("db")
	if len(tr.HiLoCalls("db", "")) != 0 {
		t.Fatal("forget")
	}
}
