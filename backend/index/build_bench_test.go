package index

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAutoBuild builds a 3-field auto index (one full-text field) over
// 20,000 documents per iteration.
func BenchmarkAutoBuild(b *testing.B) {
	const n = 20000
	db, dir := newDB(b)
	for i := 0; i < n; i += 1000 {
		var docs [][3]string
		for j := i; j < i+1000; j++ {
			docs = append(docs, [3]string{fmt.Sprintf("people/%d", j), "People",
				fmt.Sprintf(`{"Name":"Name%d","Age":%d,"City":"City %d","Bio":"likes word%d and word%d"}`, j%1000, j%100, j%50, j%1000, j%37)})
		}
		put(b, db, docs...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		def := Definition{Name: fmt.Sprintf("Auto/People/ByAgeAndCityAndSearch(Name)%d", i), Type: TypeAutoMap, Collection: "People",
			Fields: []AutoField{{Name: "Age"}, {Name: "City"}, {Name: "Name", Search: true}}}
		ix := openIndex(b, db, dir, def, Options{})
		wait(b, ix)
		ix.Close()
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "docs/s")
	b.ReportMetric(0, "ns/op")
}
