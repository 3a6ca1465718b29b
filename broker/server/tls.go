package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// keyPair holds a listener's certificate, key and CA bundle, re-read when
// one of the files changes (certificate rotation without a restart: a
// cert-manager or operator renewal rewrites the files of a mounted Secret).
// Every TLS handshake checks the files' size and modification time, a few
// stat calls next to the handshake's public-key operations; a file that is
// half written (does not parse) keeps the previous pair in use and is
// tried again at the next handshake.
type keyPair struct {
	files TLSFiles
	log   logr.Logger

	mu     sync.Mutex
	stamps [3]fileStamp
	cert   *tls.Certificate
	pool   *x509.CertPool // nil without a CA file
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) fileStamp {
	if path == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}
}

// newKeyPair loads the files; an error here stops the broker.
func newKeyPair(files TLSFiles, log logr.Logger) (*keyPair, error) {
	kp := &keyPair{files: files, log: log}
	if err := kp.reload(); err != nil {
		return nil, err
	}
	return kp, nil
}

func (kp *keyPair) reload() error {
	stamps := [3]fileStamp{stampOf(kp.files.CertFile), stampOf(kp.files.KeyFile), stampOf(kp.files.CAFile)}
	cert, err := tls.LoadX509KeyPair(kp.files.CertFile, kp.files.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS key pair %s, %s: %w", kp.files.CertFile, kp.files.KeyFile, err)
	}
	var pool *x509.CertPool
	if kp.files.CAFile != "" {
		pem, err := os.ReadFile(kp.files.CAFile)
		if err != nil {
			return fmt.Errorf("TLS CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS CA file %s: no PEM certificate", kp.files.CAFile)
		}
	}
	kp.stamps, kp.cert, kp.pool = stamps, &cert, pool
	return nil
}

// current returns the pair, re-reading changed files first.
func (kp *keyPair) current() (*tls.Certificate, *x509.CertPool) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	now := [3]fileStamp{stampOf(kp.files.CertFile), stampOf(kp.files.KeyFile), stampOf(kp.files.CAFile)}
	if now != kp.stamps {
		if err := kp.reload(); err != nil {
			kp.log.Info("TLS files changed but do not load; keeping the previous certificate", "err", err.Error())
		} else {
			kp.log.Info("TLS certificate reloaded", "cert", kp.files.CertFile, "notAfter", leafNotAfter(kp.cert))
		}
	}
	return kp.cert, kp.pool
}

func leafNotAfter(c *tls.Certificate) time.Time {
	if c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	if len(c.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
			return leaf.NotAfter
		}
	}
	return time.Time{}
}

// tls12CipherSuites are the TLS 1.2 suites the broker offers and accepts,
// as a listener and as a client (of other brokers and of etcd): forward
// secret (ECDHE) and authenticated encryption (AES-GCM,
// ChaCha20-Poly1305) only. Go's defaults still include the ECDHE
// AES-CBC-SHA1 suites (Lucky13-style padding oracles, SHA-1 MAC); every
// client that speaks TLS 1.2 (Java 8+, librdkafka with OpenSSL 1.0.1+)
// offers a GCM suite. TLS 1.3 suites are AEAD by definition and not
// configurable.
var tls12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// serverConfig is the listener's TLS configuration: TLS 1.2+ with
// tls12CipherSuites, the current pair per handshake, client certificates
// per ssl.client.auth.
func (kp *keyPair) serverConfig() *tls.Config {
	clientAuth := tls.NoClientCert
	switch kp.files.ClientAuth {
	case "requested":
		clientAuth = tls.VerifyClientCertIfGiven
	case "required":
		clientAuth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: tls12CipherSuites,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := kp.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				CipherSuites: tls12CipherSuites,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   clientAuth,
				ClientCAs:    pool,
			}, nil
		},
	}
}

// clientConfig is the inter-broker client side: the broker's own
// certificate as client certificate, the CA file as the trusted roots.
func (kp *keyPair) clientConfig(serverName string) (*tls.Config, error) {
	cert, pool := kp.current()
	if pool == nil {
		return nil, errors.New("the inter-broker listener uses TLS: set its ssl.ca.location (the CA other brokers' certificates chain to)")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: tls12CipherSuites,
		ServerName:   serverName,
		RootCAs:      pool,
		Certificates: []tls.Certificate{*cert},
	}, nil
}

// etcdClientConfig is the broker's TLS towards etcd
// (metadata.etcd.ssl.*): its certificate as client certificate and the CA
// file as roots, both re-read when the files change, so that a renewal
// reaches the next connection to etcd without a restart. The server
// certificate is verified by hand in VerifyConnection (against the CA file
// of the moment and the dialed name), which is why the built-in check is
// off.
func (kp *keyPair) etcdClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: tls12CipherSuites,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := kp.current()
			return cert, nil
		},
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := kp.current()
			if pool == nil {
				return errors.New("etcd TLS: no CA file (metadata.etcd.ssl.ca.location)")
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd TLS: server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: pool, Intermediates: inter, DNSName: cs.ServerName,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("etcd TLS: %w", err)
			}
			return nil
		},
	}
}
