package client

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// The Go client's Smuggler exports a database as a stream and imports it
// into another one: documents and their change vectors come back.
func TestIntegrationSmugglerExportImport(t *testing.T) {
	n := testserver.Start(t)
	src, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	s := src.OpenSession()
	for i := 0; i < 300; i++ {
		if err := s.Store(&User{Name: fmt.Sprintf("u%d", i), Age: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	res, err := src.Smuggler().Export(ctx, SmugglerOptions{CompressionAlgorithm: "Zstd"}, &dump)
	if err != nil {
		t.Fatal(err)
	}
	if res.Documents.ReadCount < 300 || dump.Len() < 100 || !bytes.HasPrefix(dump.Bytes(), []byte{0x28, 0xB5, 0x2F, 0xFD}) {
		t.Fatalf("export: %d documents, %d bytes, starting % x", res.Documents.ReadCount, dump.Len(), dump.Bytes()[:4])
	}
	dst, _ := newStore(t, []string{n.URL})
	imp, err := dst.Smuggler().Import(ctx, SmugglerOptions{OperateOnTypes: []string{"Documents"}}, &dump)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Documents.ReadCount != res.Documents.ReadCount {
		t.Fatalf("imported %d documents, exported %d", imp.Documents.ReadCount, res.Documents.ReadCount)
	}
	a, b := src.OpenSession(), dst.OpenSession()
	var u1, u2 User
	if _, err := a.Load("users/7-A", &u1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load("users/7-A", &u2); err != nil {
		t.Fatal(err)
	}
	cv1, _ := a.GetChangeVectorFor(&u1)
	cv2, _ := b.GetChangeVectorFor(&u2)
	if u2.Name != u1.Name || cv1 == "" || cv1 != cv2 {
		t.Fatalf("users/7-A imported as %+v (%s), exported %+v (%s)", u2, cv2, u1, cv1)
	}
	// A dump that is not one: the server's 400 says where.
	if _, err := dst.Smuggler().Import(ctx, SmugglerOptions{}, bytes.NewReader([]byte(`{"Docs":[{"a":`))); err == nil {
		t.Fatal("a truncated dump imported without error")
	}
}
