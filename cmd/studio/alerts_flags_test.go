package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// The alert thresholds are flags with their documented defaults, mirrored
// by ROOKERY_ALERT_* variables, and nonsense is refused.
func TestAlertFlags(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.alertNodeUnreachable != 10*time.Second || o.alertReplicationError != 30*time.Second || o.alertReplicationLag != 30*time.Second ||
		o.alertIndexStale != 10*time.Minute || o.alertLeaderWindow != 10*time.Minute || o.alertElections != 3 || o.alertCertificateDays != 30 || o.maxAlerts != 1000 {
		t.Fatalf("defaults %+v", o)
	}
	t.Setenv("ROOKERY_ALERT_NODE_UNREACHABLE", "3s")
	t.Setenv("ROOKERY_ALERT_CERTIFICATE_DAYS", "7")
	o, err = parse([]string{"--alert-index-stale", "1m", "--alert-elections", "5", "--max-alerts", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.alertNodeUnreachable != 3*time.Second || o.alertCertificateDays != 7 || o.alertIndexStale != time.Minute || o.alertElections != 5 || o.maxAlerts != 50 {
		t.Fatalf("set %+v", o)
	}
	for _, bad := range [][]string{{"--alert-replication-lag", "0s"}, {"--alert-certificate-days", "-1"}, {"--max-alerts", "0"}} {
		if _, err := parse(bad, io.Discard); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "-")) {
			t.Fatalf("%v accepted: %v", bad, err)
		}
	}
}
