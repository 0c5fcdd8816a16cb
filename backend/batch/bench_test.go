package batch_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/batch"
)

// BenchmarkParse reads a SaveChanges body of 1,000 small orders, as the
// npm client sends it.
func BenchmarkParse(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"Commands":[`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"Id":"orders/%d-A","ChangeVector":null,"Document":{"Company":"companies/1-A","Freight":32.38,`+
			`"ShipTo":{"City":"Reims","Country":"France"},"Lines":[{"Product":"products/11-A","Quantity":12},{"Product":"products/42-A","Quantity":10}],`+
			`"@metadata":{"@collection":"Orders","Raven-Node-Type":"Order","@nested-object-types":{}}},"Type":"PUT"}`, i)
	}
	sb.WriteString(`],"TransactionMode":"SingleNode"}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		cmds, err := batch.Parse(bytes.NewReader(body))
		if err != nil || len(cmds) != 1000 {
			b.Fatal(err)
		}
	}
}
