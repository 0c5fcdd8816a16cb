package smuggler_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/rookerydb/rookery/internal/testserver"
)

// layout writes a dump the way a RavenDB version lays it out: the sections
// it writes, in its order, with attachment streams (header then raw bytes)
// before their documents and a time-series segment after its header.
func layout(version string) string {
	att := "\x89PNG\r\n\x1a\n" + `{"not":"json"],[` + strings.Repeat("\x00", 40)
	attHeader := fmt.Sprintf(`{"@metadata":{"@export-type":"Attachment"},"Hash":"aGFzaDE=","Size":%d,"Tag":"patients/20-a|d|profile_picture.png|aGFzaDE=|image/png"}`, len(att))
	patient := `{"firstName":"Alexis","visits":[{"doctorId":"doctors/1-A"}],"@metadata":{"@collection":"Patients","Raven-Java-Type":"net.ravendb.demo.model.Patient",` +
		`"@attachments":[{"Name":"profile_picture","Hash":"aGFzaDE=","ContentType":"","Size":` + fmt.Sprint(len(att)) + `}],` +
		`"@id":"patients/20-A","@change-vector":"A:719-un3WmsZxZEKsRe/VW4qLMw","@flags":"HasAttachments","@last-modified":"2019-07-24T10:01:25.0257936"}}`
	doctor := `{"name":"Dr. Who","@metadata":{"@collection":"Doctors","@id":"doctors/1-A","@change-vector":"A:3-un3WmsZxZEKsRe/VW4qLMw","@last-modified":"2019-07-24T10:00:00.0000000Z"}}`
	hilo := `{"Max":128,"@metadata":{"@collection":"@hilo","@id":"Raven/Hilo/patients","@change-vector":"A:720-un3WmsZxZEKsRe/VW4qLMw","@last-modified":"2019-07-24T10:01:25.0000000Z"}}`
	autoMap := `{"Type":"AutoMap","IndexDefinition":{"Name":"Auto/Patients/BybirthDate","Collections":["Patients"],"LockMode":0,"Priority":1,` +
		`"MapFields":[{"Name":"birthDate","Indexing":"Default","Aggregation":0,"Spatial":null,"HasSuggestions":false}]}}`
	autoReduce := `{"Type":"AutoMapReduce","IndexDefinition":{"Name":"Auto/Patients/ByCountReducedByfirstName","Collections":["Patients"],"LockMode":0,"Priority":1,` +
		`"MapFields":[{"Name":"Count","Indexing":"Default","Aggregation":1,"Spatial":null,"HasSuggestions":false}],` +
		`"GroupByFields":[{"Name":"firstName","Indexing":"Default","GroupByArrayBehavior":"ByIndividualValues"}]}}`
	jsIndex := `{"Type":"JavaScriptMap","IndexDefinition":{"Name":"Doctors/ByName","Maps":["map('Doctors', d => ({ Name: d.name }))"],"Reduce":null,"Fields":{},"Configuration":{},"LockMode":"Unlock","Priority":"Normal","Type":"JavaScriptMap","SourceType":"Documents"}}`
	csharp := `{"Type":"Map","IndexDefinition":{"Name":"Patients/ByVisits","Maps":["from p in docs.Patients select new { p.firstName }"],"Reduce":null,"Fields":{},"Configuration":{}}}`
	ident := `{"Key":"orders|","Value":"42"}`
	cmpx := `{"Key":"users/ayende","Value":"{\"Object\":{\"x\":1},\"@metadata\":{}}"}`
	counters := `{"DocId":"patients/20-A","ChangeVector":"A:9-un3WmsZxZEKsRe/VW4qLMw","Values":{"Counters":{"likes":{"A":3}}}}`
	sub := `{"SubscriptionName":"NewPatients","SubscriptionId":7,"Query":"from Patients","ChangeVectorForNextBatchStartingPoint":null,"Disabled":false,"MentorNode":null}`
	var b strings.Builder
	switch version {
	case "4.2":
		b.WriteString(`{"BuildVersion":42010,"DatabaseRecord":{"DatabaseName":"Demo","Encrypted":false,"Settings":{}},`)
		b.WriteString(`"Docs":[` + attHeader + att + `,` + patient + `,` + doctor + `,` + hilo + `],`)
		b.WriteString(`"Conflicts":[],"Indexes":[` + autoMap + `,` + autoReduce + `,` + csharp + `],"Identities":[` + ident + `],`)
		b.WriteString(`"CompareExchange":[` + cmpx + `],"CounterGroups":[` + counters + `],"Subscriptions":[` + sub + `]}`)
	case "5.4", "6.0", "7.1":
		seg := "\x01\x02\x03]},{\x04"
		build := map[string]string{"5.4": "54107", "6.0": "60016", "7.1": "71003"}[version]
		b.WriteString(`{"BuildVersion":` + build + `,"DatabaseRecord":{"DatabaseName":"Demo","Encrypted":false},`)
		b.WriteString(`"Docs":[` + attHeader + att + `,` + patient + `,` + doctor + `,` + hilo + `],`)
		b.WriteString(`"RevisionDocuments":[` + doctor + `],"Tombstones":[],"Conflicts":[],`)
		b.WriteString(`"Indexes":[` + autoMap + `,` + autoReduce + `,` + jsIndex + `,` + csharp + `],"Identities":[` + ident + `],`)
		b.WriteString(`"CompareExchange":[` + cmpx + `],"CompareExchangeTombstones":[],"CounterGroups":[` + counters + `],"Subscriptions":[` + sub + `],`)
		b.WriteString(fmt.Sprintf(`"TimeSeries":[{"@document":{"DocId":"patients/20-A","Name":"heartrate","ChangeVector":"A:5-x","Collection":"Patients","Baseline":"2019-07-24T00:00:00.0000000Z"},"@size":%d}`, len(seg)) + seg + `],`)
		b.WriteString(`"TimeSeriesDeletedRanges":[],"ReplicationHubCertificates":[]}`)
	case "3.5-names":
		// Legacy names the importer still accepts.
		b.WriteString(`{"Results":[` + doctor + `],"Transformers":[{"name":"t"}],"Identities":[` + ident + `]}`)
	}
	return b.String()
}

func compress(t *testing.T, raw, how string) []byte {
	var buf bytes.Buffer
	switch how {
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write([]byte(raw))
		w.Close()
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(raw))
		w.Close()
	default:
		buf.WriteString(raw)
	}
	return buf.Bytes()
}

// TestImportEveryFormatVersion imports dumps laid out as RavenDB 4.2 (gzip),
// 5.4 (gzip), 6.0 and 7.1 (zstd) and with 3.x's legacy section names
// (plain), attachment streams and time-series segments embedded, and checks
// what came in and what the result says of the rest.
func TestImportEveryFormatVersion(t *testing.T) {
	n := testserver.Start(t)
	cases := []struct{ version, compression string }{
		{"4.2", "gzip"}, {"5.4", "gzip"}, {"6.0", "zstd"}, {"7.1", "zstd"}, {"7.1", "gzip"}, {"3.5-names", "none"},
	}
	for i, c := range cases {
		db := fmt.Sprintf("fmt%d", i)
		createDB(t, n.URL, db)
		st, body := importDump(t, n.URL, db, compress(t, layout(c.version), c.compression), "{}")
		if st != 200 {
			t.Fatalf("%s %s: %d %s", c.version, c.compression, st, body)
		}
		var res struct {
			Documents struct {
				ReadCount   int64
				Attachments struct{ ReadCount int64 }
			}
			Indexes    struct{ ReadCount, ErroredCount int64 }
			Identities struct{ ReadCount int64 }
			TimeSeries struct{ ReadCount int64 }
			Messages   []string
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		got := take(t, n.URL, db)
		if !strings.Contains(got.Identities, `"orders|":42`) {
			t.Errorf("%s: identities %s", c.version, got.Identities)
		}
		doctor := got.Docs["doctors/1-A"]
		if !strings.Contains(doctor, `"@change-vector":"A:3-un3WmsZxZEKsRe/VW4qLMw"`) || !strings.Contains(doctor, `"name":"Dr. Who"`) {
			t.Errorf("%s: doctors/1-A is %s", c.version, doctor)
		}
		if c.version == "3.5-names" {
			if res.Documents.ReadCount != 1 || len(got.Docs) != 1 {
				t.Errorf("3.5 names: %d read, %d stored", res.Documents.ReadCount, len(got.Docs))
			}
			continue
		}
		if res.Documents.ReadCount != 3 || res.Documents.Attachments.ReadCount != 1 {
			t.Errorf("%s: documents %d, attachments %d", c.version, res.Documents.ReadCount, res.Documents.Attachments.ReadCount)
		}
		if p := got.Docs["patients/20-A"]; !strings.Contains(p, `"firstName":"Alexis"`) || !strings.Contains(p, `"Raven-Java-Type":"net.ravendb.demo.model.Patient"`) ||
			!strings.Contains(p, `"@last-modified":"2019-07-24T10:01:25.0257936Z"`) {
			t.Errorf("%s: patients/20-A is %s", c.version, p)
		}
		if h := got.Docs["Raven/Hilo/patients"]; !strings.Contains(h, `"Max":128`) {
			t.Errorf("%s: the HiLo document is %q", c.version, h)
		}
		wantIdx := 2 // the auto indexes; the C# one is skipped
		if c.version != "4.2" {
			wantIdx = 3 // and the JavaScript one
		}
		if int(res.Indexes.ReadCount) != wantIdx || res.Indexes.ErroredCount != 1 || len(got.Indexes) != wantIdx {
			t.Errorf("%s: indexes read %d, errored %d, defined %q", c.version, res.Indexes.ReadCount, res.Indexes.ErroredCount, got.Indexes)
		}
		msgs := strings.Join(res.Messages, "\n")
		if !strings.Contains(msgs, "Patients/ByVisits skipped: a C#/LINQ index") {
			t.Errorf("%s: no message naming the skipped C# index:\n%s", c.version, msgs)
		}
		if len(got.Subscriptions) != 1 || !strings.Contains(got.Subscriptions[0], "NewPatients") {
			t.Errorf("%s: subscriptions %q", c.version, got.Subscriptions)
		}
		if c.version != "4.2" && res.TimeSeries.ReadCount != 1 {
			t.Errorf("%s: time series read %d", c.version, res.TimeSeries.ReadCount)
		}
	}
}
