package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Validity bounds and defaults.
const (
	// DefaultCAValidity is a new cluster CA's lifetime.
	DefaultCAValidity = 2 * 365 * 24 * time.Hour
	// MinCAValidity and MaxCAValidity bound a configured CA lifetime.
	MinCAValidity = 365 * 24 * time.Hour
	MaxCAValidity = 5 * 365 * 24 * time.Hour
	// DefaultLeafValidity is a broker, etcd or client certificate's
	// lifetime (capped at the CA's NotAfter).
	DefaultLeafValidity = 365 * 24 * time.Hour
	// DefaultRenewBefore: renew when less than this is left.
	DefaultRenewBefore = 30 * 24 * time.Hour
	// backdate covers clocks of peers that are a little behind.
	backdate = 5 * time.Minute
)

// KeyPair is a certificate with its private key, parsed and as PEM.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte // PKCS#8
}

// NewCA creates a self-signed CA certificate named cn, valid from now for
// validity (DefaultCAValidity when 0).
func NewCA(cn string, validity time.Duration, now time.Time) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	return selfSign(pkix.Name{CommonName: cn, Organization: []string{"strata"}}, key, validity, now)
}

// RenewCA issues a new self-signed certificate for ca's subject and key,
// valid from now for validity: leaves signed under the old certificate
// verify against the new one and the reverse (same subject and key).
func RenewCA(ca *KeyPair, validity time.Duration, now time.Time) (*KeyPair, error) {
	return selfSign(ca.Cert.Subject, ca.Key, validity, now)
}

func selfSign(subject pkix.Name, key crypto.Signer, validity time.Duration, now time.Time) (*KeyPair, error) {
	if validity == 0 {
		validity = DefaultCAValidity
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               subject,
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		// SubjectKeyId is left to crypto/x509, which derives it from the
		// public key: a renewed CA certificate keeps it, so leaves' AKID
		// still match.
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	return pair(der, key)
}

// LeafOptions describe a certificate to issue.
type LeafOptions struct {
	// Subject; CommonName is the principal of a client certificate.
	Subject pkix.Name
	// Hosts are the DNS names and IP addresses (SANs) of a server.
	Hosts []string
	// Validity (DefaultLeafValidity when 0), capped at the CA's NotAfter.
	Validity time.Duration
	// NotBefore, NotAfter override the validity (tests: expired leaves).
	NotBefore, NotAfter time.Time
	// Server and Client select the extended key usages; neither means both.
	Server, Client bool
}

// Issue signs a new leaf with a fresh P-256 key.
func (ca *KeyPair) Issue(o LeafOptions, now time.Time) (*KeyPair, error) {
	if !ca.Cert.IsCA {
		return nil, errors.New("issue: signer is not a CA certificate")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	if o.Validity == 0 {
		o.Validity = DefaultLeafValidity
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-backdate)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(o.Validity)
		if o.NotAfter.After(ca.Cert.NotAfter) {
			o.NotAfter = ca.Cert.NotAfter
		}
	}
	var eku []x509.ExtKeyUsage
	if o.Server || !o.Client {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if o.Client || !o.Server {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      o.Subject,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  eku,
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue %q: %w", o.Subject.CommonName, err)
	}
	return pair(der, key)
}

func pair(der []byte, key crypto.Signer) (*KeyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ParseKeyPair parses a PEM certificate (the first of a chain) and its
// key (PKCS#8, PKCS#1 or SEC 1), checking that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse key pair: %w", err)
	}
	signer, ok := tc.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("parse key pair: key cannot sign")
	}
	cert, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse key pair: %w", err)
	}
	return &KeyPair{Cert: cert, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseCertificates parses every CERTIFICATE block of a PEM bundle.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// TrustBundle is the PEM of current followed by those of previous that are
// still valid at now, each certificate once: what peers must trust while
// certificates issued under an older CA certificate are still in use.
func TrustBundle(current *x509.Certificate, previous []*x509.Certificate, now time.Time) []byte {
	var buf bytes.Buffer
	seen := []*x509.Certificate{current}
	_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: current.Raw})
	for _, c := range previous {
		if slices.ContainsFunc(seen, c.Equal) || !now.Before(c.NotAfter) {
			continue
		}
		seen = append(seen, c)
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// RenewPolicy says when a certificate is due for renewal.
type RenewPolicy struct {
	// RenewBefore: renew when less than this is left (DefaultRenewBefore
	// when 0).
	RenewBefore time.Duration
	// RenewFraction, in (0, 1): also renew when less than this fraction of
	// the whole validity is left (short-lived certificates, where 30 days
	// would be most of their life, or an earlier renewal). 0: off.
	RenewFraction float64
}

// RenewAt is when c is due for renewal under p: the earlier of
// NotAfter-RenewBefore and the point where RenewFraction of its validity
// is left.
func (p RenewPolicy) RenewAt(c *x509.Certificate) time.Time {
	before := p.RenewBefore
	if before == 0 {
		before = DefaultRenewBefore
	}
	var byFrac time.Duration
	if f := p.RenewFraction; f > 0 && f < 1 {
		byFrac = time.Duration(float64(c.NotAfter.Sub(c.NotBefore)) * f)
	}
	return c.NotAfter.Add(-max(before, byFrac))
}

// Due reports whether c must be renewed at now.
func (p RenewPolicy) Due(c *x509.Certificate, now time.Time) bool {
	return !now.Before(p.RenewAt(c))
}

// Reason says why leaf must be re-issued at now, or "" when it is good:
// not signed by ca, due for renewal, or missing one of hosts (a SAN).
func Reason(leaf, ca *x509.Certificate, hosts []string, p RenewPolicy, now time.Time) string {
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return "not signed by the current CA"
	}
	if now.Before(leaf.NotBefore) {
		return "not yet valid"
	}
	if p.Due(leaf, now) {
		return fmt.Sprintf("expires %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, h := range hosts {
		if !hasHost(leaf, h) {
			return fmt.Sprintf("does not name %s", h)
		}
	}
	return ""
}

func hasHost(c *x509.Certificate, h string) bool {
	if ip := net.ParseIP(h); ip != nil {
		return slices.ContainsFunc(c.IPAddresses, ip.Equal)
	}
	return slices.Contains(c.DNSNames, h)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}
