package studio

import (
	"context"
	"encoding/pem"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
)

// The certificate watcher follows --alert-certificate-days: with 7 days, a
// certificate ending in 10 days raises nothing and one ending in 5 days a
// warning for operators linking to the Certificates page; an alert kept
// from an earlier run for a certificate that is gone is cleared.
func TestCertificateAlertThreshold(t *testing.T) {
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
	ten := register("ten", now.Add(10*24*time.Hour))
	s := &Studio{Alerts: alerts.New(), Cluster: cl, NodeTag: "A", CertificateWarning: 7 * 24 * time.Hour}
	s.Alerts.Raise(alerts.Alert{Key: certAlertPrefix + "expiring/gone-thumbprint", Title: "from an earlier run"})
	s.certificateTick(now)
	if all := s.Alerts.All(); len(all) != 0 {
		t.Fatalf("with 7 days: %+v", all)
	}
	five := register("five", now.Add(5*24*time.Hour))
	s.certificateTick(now.Add(time.Second)) // the cluster state moved
	a, ok := s.Alerts.Get(certAlertPrefix + "expiring/" + five.Thumbprint)
	if !ok || a.Link != "/studio/certificates" || !a.OperatorOnly || a.Level != alerts.Warning || len(s.Alerts.All()) != 1 {
		t.Fatalf("five days: %+v, all %+v", a, s.Alerts.All())
	}
	if _, ok := s.Alerts.Get(certAlertPrefix + "expiring/" + ten.Thumbprint); ok {
		t.Fatal("ten days flagged")
	}
}
