package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func verify(t *testing.T, leaf *x509.Certificate, roots []byte, host string, at time.Time, usage x509.ExtKeyUsage) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		t.Fatal("no roots")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func TestIssueServerAndClient(t *testing.T) {
	ca, err := NewCA("strata cluster CA", 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.NotAfter.Sub(t0) != DefaultCAValidity {
		t.Fatalf("CA: IsCA=%v NotAfter=%s", ca.Cert.IsCA, ca.Cert.NotAfter)
	}
	hosts := []string{"c-a-0.c-brokers.ns.svc", "c-bootstrap.ns.svc", "10.0.0.7"}
	leaf, err := ca.Issue(LeafOptions{Subject: pkix.Name{CommonName: "strata-broker"}, Hosts: hosts}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := verify(t, leaf.Cert, ca.CertPEM, h, t0.Add(time.Hour), x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("server %s: %v", h, err)
		}
	}
	if err := verify(t, leaf.Cert, ca.CertPEM, "", t0.Add(time.Hour), x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("as client: %v", err)
	}
	if err := verify(t, leaf.Cert, ca.CertPEM, "other.ns.svc", t0.Add(time.Hour), x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("a name not in the SANs verified")
	}
	client, err := ca.Issue(LeafOptions{Subject: pkix.Name{CommonName: "strata-operator"}, Client: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, client.Cert, ca.CertPEM, "", t0, x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("a client-only certificate verified as a server")
	}
	back, err := ParseKeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil || !back.Cert.Equal(leaf.Cert) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := ParseKeyPair(leaf.CertPEM, client.KeyPEM); err == nil {
		t.Error("a certificate with another key's PEM parsed")
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	ca, err := NewCA("ca", MinCAValidity, t0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(LeafOptions{Validity: 3 * MinCAValidity}, t0.Add(300*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("leaf NotAfter %s, CA %s", leaf.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestRenewPolicy(t *testing.T) {
	year := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(365 * 24 * time.Hour)}
	day := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(24 * time.Hour)}
	for _, tc := range []struct {
		name string
		p    RenewPolicy
		c    *x509.Certificate
		at   time.Time
		due  bool
	}{
		{"year, 31 days left", RenewPolicy{}, year, year.NotAfter.Add(-31 * 24 * time.Hour), false},
		{"year, 29 days left", RenewPolicy{}, year, year.NotAfter.Add(-29 * 24 * time.Hour), true},
		// 20% of a year (73 days) is more than 30 days: the fraction wins.
		{"year, 60 days left, fraction 0.2", RenewPolicy{RenewFraction: 0.2}, year, year.NotAfter.Add(-60 * 24 * time.Hour), true},
		{"year, 60 days left, fraction 0.1", RenewPolicy{RenewFraction: 0.1}, year, year.NotAfter.Add(-60 * 24 * time.Hour), false},
		{"year, 29 days left, fraction 0.1", RenewPolicy{RenewFraction: 0.1}, year, year.NotAfter.Add(-29 * 24 * time.Hour), true},
		{"day-long, fresh", RenewPolicy{RenewBefore: time.Hour, RenewFraction: 0.5}, day, t0.Add(11 * time.Hour), false},
		{"day-long, half gone", RenewPolicy{RenewBefore: time.Hour, RenewFraction: 0.5}, day, t0.Add(12 * time.Hour), true},
		{"expired", RenewPolicy{}, day, t0.Add(48 * time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Due(tc.c, tc.at); got != tc.due {
				t.Fatalf("Due = %v at %s (renew at %s), want %v", got, tc.at, tc.p.RenewAt(tc.c), tc.due)
			}
		})
	}
}

func TestReason(t *testing.T) {
	ca, _ := NewCA("ca", 0, t0)
	other, _ := NewCA("ca", 0, t0) // same name, another key
	leaf, err := ca.Issue(LeafOptions{Hosts: []string{"a.svc", "b.svc"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p := RenewPolicy{RenewFraction: 0.1}
	for _, tc := range []struct {
		name  string
		ca    *KeyPair
		hosts []string
		at    time.Time
		want  string
	}{
		{"good", ca, []string{"a.svc"}, t0.Add(time.Hour), ""},
		{"scaled up", ca, []string{"a.svc", "c.svc"}, t0.Add(time.Hour), "does not name c.svc"},
		{"foreign CA", other, nil, t0.Add(time.Hour), "not signed by the current CA"},
		{"near expiry", ca, nil, leaf.Cert.NotAfter.Add(-24 * time.Hour), "expires "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Reason(leaf.Cert, tc.ca.Cert, tc.hosts, p, tc.at)
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Reason = %q, want %q", got, tc.want)
			}
		})
	}
}

// A CA renewed with the same key keeps old leaves valid under the new
// certificate and new leaves valid for peers that only have the old one:
// no moment where two brokers with different bundles refuse each other.
func TestRenewCAKeepsBothWaysTrust(t *testing.T) {
	ca, err := NewCA("ca", MinCAValidity, t0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf, _ := ca.Issue(LeafOptions{Hosts: []string{"b.svc"}}, t0)
	renewAt := t0.Add(MinCAValidity - 20*24*time.Hour)
	ca2, err := RenewCA(ca, MinCAValidity, renewAt)
	if err != nil {
		t.Fatal(err)
	}
	if ca2.Cert.Equal(ca.Cert) || !ca2.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Fatal("RenewCA did not make a new, longer certificate")
	}
	newLeaf, _ := ca2.Issue(LeafOptions{Hosts: []string{"b.svc"}}, renewAt)
	at := renewAt.Add(time.Hour)
	if err := verify(t, oldLeaf.Cert, ca2.CertPEM, "b.svc", at, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("old leaf under the new CA certificate: %v", err)
	}
	if err := verify(t, newLeaf.Cert, ca.CertPEM, "b.svc", at, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("new leaf under the old CA certificate: %v", err)
	}
	// The old certificate is both in the stored bundle and the one just
	// replaced: it appears once.
	bundle := TrustBundle(ca2.Cert, []*x509.Certificate{ca.Cert, ca2.Cert, ca.Cert}, at)
	certs, err := ParseCertificates(bundle)
	if err != nil || len(certs) != 2 || !certs[0].Equal(ca2.Cert) {
		t.Fatalf("bundle before the old CA expires: %d certificates, %v", len(certs), err)
	}
	certs, _ = ParseCertificates(TrustBundle(ca2.Cert, []*x509.Certificate{ca.Cert}, ca.Cert.NotAfter))
	if len(certs) != 1 {
		t.Fatalf("bundle after the old CA expired has %d certificates, want 1", len(certs))
	}
}
