// Package devcerts writes a throw-away certificate authority and
// certificates signed by it as PEM files: `strata dev --security` and the
// security tests use it. It is not a production CA (the operator's cluster
// CA is), only ECDSA P-256 keys with the SANs asked for;
// the certificates themselves come from internal/pki.
package devcerts

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-dev/strata/internal/pki"
)

// CA is a certificate authority with its key in memory.
type CA struct {
	// CertFile is the CA certificate (PEM), what clients trust.
	CertFile string
	ca       *pki.KeyPair
}

// NewCA creates a self-signed CA named cn, valid for 10 years, and writes
// its certificate to dir/<name>.crt.
func NewCA(dir, name, cn string) (*CA, error) {
	kp, err := pki.NewCA(cn, 10*365*24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	ca := &CA{CertFile: filepath.Join(dir, name+".crt"), ca: kp}
	if err := writeFile(ca.CertFile, kp.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// Options of an issued certificate.
type Options struct {
	// Hosts are DNS names or IP addresses (SANs) of a server certificate.
	Hosts []string
	// Subject is the certificate's subject (a client's principal source).
	Subject pkix.Name
	// NotBefore and NotAfter default to an hour ago and a year from now.
	NotBefore, NotAfter time.Time
}

// Issue writes dir/<name>.crt and dir/<name>.key (PEM; the key in PKCS#8),
// a certificate usable as server and client certificate.
func (ca *CA) Issue(dir, name string, o Options) (certFile, keyFile string, err error) {
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(365 * 24 * time.Hour)
	}
	if o.Subject.CommonName == "" {
		o.Subject.CommonName = name
	}
	leaf, err := ca.ca.Issue(pki.LeafOptions{Subject: o.Subject, Hosts: o.Hosts, NotBefore: o.NotBefore, NotAfter: o.NotAfter}, now)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writeFile(keyFile, leaf.KeyPEM); err != nil {
		return "", "", err
	}
	if err := writeFile(certFile, leaf.CertPEM); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// writeFile writes the file through a temporary file and a rename, so that
// a broker re-reading it never sees half a file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
