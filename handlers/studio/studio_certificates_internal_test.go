package studio

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
)

// selfSigned makes a certificate named cn that ends at notAfter.
func selfSigned(t *testing.T, cn string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func alertByKey(list []alerts.Alert, prefix string) (alerts.Alert, bool) {
	for _, a := range list {
		if strings.HasPrefix(a.Key, prefix) {
			return a, true
		}
	}
	return alerts.Alert{}, false
}

// TestCertificateExpiryAlerts: a registered certificate and this node's
// own raise an alert within 30 days of their end and an error once ended;
// one far from its end raises nothing; the check waits for the cluster
// state to move or an hour to pass; a dismissed alert stays dismissed;
// revoking clears it; and only those who may manage certificates see
// them.
func TestCertificateExpiryAlerts(t *testing.T) {
	cl, err := cluster.Open(cluster.Config{NodeTag: "A", RaftAddr: "127.0.0.1:0", URL: "http://a.test", Dir: t.TempDir(), Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	register := func(name string, notAfter time.Time) auth.Certificate {
		t.Helper()
		x := selfSigned(t, name, notAfter)
		cert, err := auth.NewCertificate(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw}), auth.ValidUser, nil, now, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.PutCertificate(ctx, cert); err != nil {
			t.Fatal(err)
		}
		return cert
	}
	soon := register("<b>soon</b>", now.Add(10*24*time.Hour+time.Hour))
	register("later", now.Add(100*24*time.Hour))
	node := selfSigned(t, "node.test", now.Add(5*24*time.Hour))
	s := &Studio{Alerts: alerts.New(), Cluster: cl, NodeTag: "A", ServerCertificate: base64.StdEncoding.EncodeToString(node.Raw)}

	s.certificateTick(now)
	list := s.Alerts.List()
	if len(list) != 2 {
		t.Fatalf("alerts: %+v", list)
	}
	a, ok := alertByKey(list, certAlertPrefix+"expiring/"+soon.Thumbprint)
	if !ok || a.Level != alerts.Warning || a.Title != "Certificate expires soon" || !strings.Contains(a.Message, "<b>soon</b>") || !strings.Contains(a.Message, "in 10 days") {
		t.Fatalf("the expiring certificate's alert: %+v", a)
	}
	if !strings.Contains(alertText(list), "This node's certificate expires soon: Node A's certificate node.test") {
		t.Fatalf("this node's certificate: %s", alertText(list))
	}

	// Nothing moved and within the hour: not evaluated again.
	s.Alerts.Clear(certAlertPrefix + "expiring/" + soon.Thumbprint)
	s.certificateTick(now.Add(time.Minute))
	if _, ok := alertByKey(s.Alerts.List(), certAlertPrefix+"expiring/"+soon.Thumbprint); ok {
		t.Fatal("re-evaluated within the hour without a change")
	}
	s.certificateTick(now.Add(2 * time.Hour))
	if _, ok := alertByKey(s.Alerts.List(), certAlertPrefix+"expiring/"+soon.Thumbprint); !ok {
		t.Fatal("not re-evaluated after an hour")
	}

	// Eleven days on: expired, an error; the warning is gone.
	later := now.Add(11 * 24 * time.Hour)
	s.certificateTick(later)
	list = s.Alerts.List()
	a, ok = alertByKey(list, certAlertPrefix+"expired/"+soon.Thumbprint)
	if !ok || a.Level != alerts.Error || a.Title != "Certificate expired" {
		t.Fatalf("expired: %+v", list)
	}
	if _, ok := alertByKey(list, certAlertPrefix+"expiring/"+soon.Thumbprint); ok {
		t.Fatal("the expiring alert stayed after it expired")
	}
	if !strings.Contains(alertText(list), "This node's certificate expired") {
		t.Fatalf("this node's expired certificate: %v", alertText(list))
	}

	// Who sees them.
	operator := auth.WithIdentity(context.Background(), &auth.Identity{Name: "op", Clearance: auth.Operator})
	user := auth.WithIdentity(context.Background(), &auth.Identity{Name: "u", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.Admin}})
	if got := len(s.visibleAlerts(operator)); got != 2 {
		t.Fatalf("an Operator sees %d certificate alerts, want 2", got)
	}
	if got := s.visibleAlerts(user); len(got) != 0 {
		t.Fatalf("a ValidUser sees certificate alerts: %+v", got)
	}

	// Dismissed: stays quiet while the condition holds.
	s.Alerts.Dismiss(a.ID)
	s.certificateTick(later.Add(2 * time.Hour))
	if _, ok := alertByKey(s.Alerts.List(), certAlertPrefix+"expired/"+soon.Thumbprint); ok {
		t.Fatal("a dismissed alert came back")
	}
	// Revoked: cleared, at the next tick (the state moved).
	if _, err := cl.DeleteCertificate(ctx, soon.Thumbprint); err != nil {
		t.Fatal(err)
	}
	s.certificateTick(later.Add(2*time.Hour + time.Second))
	s.Alerts.Raise(alerts.Alert{Key: certAlertPrefix + "expired/" + soon.Thumbprint, Title: "again"})
	if _, ok := alertByKey(s.Alerts.List(), certAlertPrefix+"expired/"+soon.Thumbprint); !ok {
		t.Fatal("revoking did not clear the dismissal of its alert")
	}
}

func alertText(list []alerts.Alert) string {
	var b strings.Builder
	for _, a := range list {
		b.WriteString(a.Title + ": " + a.Message + "\n")
	}
	return b.String()
}
