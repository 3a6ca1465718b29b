package bench

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kgoOpts are the client options of a SASL_SSL cluster (none for nil).
func (s *ClientSecurity) kgoOpts() ([]kgo.Opt, error) {
	if s == nil {
		return nil, nil
	}
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster CA %s: no PEM certificate", s.CAFile)
	}
	a := scram.Auth{User: s.User, Pass: s.Password}
	mech := a.AsSha512Mechanism()
	if s.Mechanism == "SCRAM-SHA-256" {
		mech = a.AsSha256Mechanism()
	}
	return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), kgo.SASL(mech)}, nil
}
