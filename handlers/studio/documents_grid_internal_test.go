package studio

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/storage"
)

// FuzzDocsGridCells renders grid cells from arbitrary bodies (as the
// bounded read hands them over: any prefix of a document, deep or huge):
// nothing panics, and every cell is valid UTF-8 of at most cellRunes
// characters, its tooltip at most titleRunes.
func FuzzDocsGridCells(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"x":[1,2,{"y":null}]},"c":"` + strings.Repeat("é", 300) + `","@metadata":{"@collection":"X"}}`))
	f.Add([]byte(`{"deep":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`))
	f.Add([]byte(`{"deep":` + strings.Repeat(`{"a":`, 5000)))
	f.Add([]byte(`{"cut":"` + strings.Repeat("x", gridBodyBytes)))
	f.Add([]byte(`{"n":-12.5e3,"t":true,"f":false,"z":null,"o":{},"l":[]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > gridBodyBytes {
			body = body[:gridBodyBytes] // what the grid reads at most
		}
		items := []gridItem{{doc: &storage.Document{ID: "x/1", Collection: "X", Body: body}}}
		for _, chosen := range [][]string{nil, {"a", "deep", "cut", "o", "l"}} {
			_, _, rows := docsGridRows("db", items, chosen)
			for _, c := range rows[0].Cells {
				if !utf8.ValidString(c.Text) || utf8.RuneCountInString(c.Text) > cellRunes {
					t.Fatalf("cell text %q", c.Text)
				}
				if !utf8.ValidString(c.Title) || utf8.RuneCountInString(c.Title) > titleRunes {
					t.Fatalf("cell title of %d runes", utf8.RuneCountInString(c.Title))
				}
			}
		}
	})
}
