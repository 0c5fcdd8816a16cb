package document

import (
	"fmt"
	"strings"
	"testing"
)

// benchDocs are the bodies the parse benchmarks read: a small order as the
// npm client sends it, and a large document with nested arrays and long
// strings (about 100 KB).
func benchDocs() map[string][]byte {
	small := []byte(`{"Company":"companies/1-A","Employee":"employees/3-A","OrderedAt":"2024-05-01T00:00:00.0000000","Freight":32.38,` +
		`"ShipTo":{"City":"Reims","Country":"France","Line1":"59 rue de l'Abbaye","PostalCode":"51100"},` +
		`"Lines":[{"Product":"products/11-A","ProductName":"Queso Cabrales","PricePerUnit":14,"Quantity":12,"Discount":0},` +
		`{"Product":"products/42-A","ProductName":"Singaporean Hokkien Fried Mee","PricePerUnit":9.8,"Quantity":10,"Discount":0}],` +
		`"@metadata":{"@collection":"Orders","Raven-Node-Type":"Order","@nested-object-types":{}}}`)
	var b strings.Builder
	b.WriteString(`{"Name":"big","Items":[`)
	for i := 0; i < 400; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"N":%d,"Text":"%s","Tags":["a","b",{"k":[1,2,[3,4]]}],"Nested":{"x":{"y":{"z":%d}}}}`, i, strings.Repeat("lorem ipsum ", 15), i)
	}
	b.WriteString(`],"@metadata":{"@collection":"Bigs"}}`)
	return map[string][]byte{"small": small, "large": []byte(b.String())}
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"small", "large"} {
		raw := benchDocs()[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDepthScan is what the depth limit adds to Parse of the large
// document: one scan of each member value long enough to be too deep.
func BenchmarkDepthScan(b *testing.B) {
	raw := benchDocs()["large"]
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if deeperThan(raw, DefaultMaxDepth) >= 0 {
			b.Fatal("too deep")
		}
	}
}
