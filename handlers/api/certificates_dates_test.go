package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/internal/testserver"
)

// ravenDate is how RavenDB writes dates (.NET's round-trip format, seven
// fraction digits, UTC): the npm client's date parser needs the fraction
// ("2029-02-26T19:45:19Z" fails GetCertificatesOperation with "Could not
// parse date string '2020000-02-26T19:45:19Z'").
var ravenDate = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$`)

func TestCertificateDatesInRavenDBFormat(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Secured: true})
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: adminTLS(t, n.Certs)}}
	reader, err := pki.IssueClient(n.Certs.Dir, pki.ClientOptions{Name: "reader", PFXPassword: "x"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"Name":"reader","Certificate":"` + reader.CertificateBase64 + `","SecurityClearance":"ValidUser","Permissions":{"db":"Read"}}`
	req, _ := http.NewRequest("PUT", n.URL+"/admin/certificates", strings.NewReader(body))
	resp, err := cl.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("register: %v %v", resp, err)
	}
	resp.Body.Close()

	for _, u := range []string{"/admin/certificates", "/admin/certificates?metadataOnly=true&thumbprint=" + reader.Thumbprint} {
		var got struct{ Results []map[string]any }
		getJSONOver(t, cl, n.URL+u, &got)
		if len(got.Results) != 1 {
			t.Fatalf("%s: %+v", u, got)
		}
		for _, k := range []string{"NotAfter", "NotBefore", "Added"} {
			if s, _ := got.Results[0][k].(string); !ravenDate.MatchString(s) {
				t.Errorf("%s: %s is %v, not in RavenDB's date format", u, k, got.Results[0][k])
			}
		}
	}
	var who map[string]any
	getJSONOver(t, cl, n.URL+"/certificates/whoami", &who)
	if s, _ := who["NotAfter"].(string); !ravenDate.MatchString(s) {
		t.Errorf("whoami NotAfter is %v, not in RavenDB's date format", who["NotAfter"])
	}
}

// adminTLS presents admin.pem and trusts the cluster's CA.
func adminTLS(t *testing.T, certs *pki.SetupResult) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certs.Admin.PEM, certs.Admin.PEM)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
}

func getJSONOver(t *testing.T, cl *http.Client, u string, v any) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
