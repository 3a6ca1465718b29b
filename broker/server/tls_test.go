package server

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/internal/devcerts"
)

// TestTLS12AEADOnly: a TLS 1.2 client offering only CBC suites is refused
// by a broker listener, one offering a GCM or ChaCha20-Poly1305 suite
// connects; and the broker as a client (to other brokers, to etcd) does
// not accept a CBC suite from a server either.
func TestTLS12AEADOnly(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA(dir, "ca", "tls test CA")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := newKeyPair(TLSFiles{CertFile: certFile, KeyFile: keyFile, CAFile: ca.CertFile}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}

	// serve accepts one connection on a loopback listener with cfg and
	// returns the server side's handshake error.
	serve := func(cfg *tls.Config) (addr string, result <-chan error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			done <- tls.Server(c, cfg).Handshake()
		}()
		return ln.Addr().String(), done
	}
	dial := func(addr string, cfg *tls.Config) error {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return tls.Client(c, cfg).Handshake()
	}
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
		tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256}

	for _, tc := range []struct {
		name   string
		suites []uint16
		ok     bool
	}{
		{"CBC only", cbc, false},
		{"AES-GCM", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
		{"ChaCha20-Poly1305", []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, true},
	} {
		t.Run("listener/"+tc.name, func(t *testing.T) {
			addr, srvErr := serve(kp.serverConfig())
			err := dial(addr, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
				CipherSuites: tc.suites, RootCAs: roots, ServerName: "127.0.0.1"})
			if (err == nil) != tc.ok {
				t.Fatalf("TLS 1.2 client offering %s: handshake error %v, want success %v", tc.name, err, tc.ok)
			}
			if err := <-srvErr; (err == nil) != tc.ok {
				t.Fatalf("listener side: %v", err)
			}
		})
	}

	// The broker as a client, against a TLS 1.2 server that only speaks CBC.
	cbcServer := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: cbc, Certificates: []tls.Certificate{cert}}
	interBroker, err := kp.clientConfig("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{"inter-broker": interBroker, "etcd": kp.etcdClientConfig()} {
		addr, _ := serve(cbcServer)
		if err := dial(addr, cfg); err == nil {
			t.Errorf("%s client accepted a CBC suite", name)
		}
		gcmServer := cbcServer.Clone()
		gcmServer.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
		addr, _ = serve(gcmServer)
		if err := dial(addr, cfg.Clone()); err != nil {
			t.Errorf("%s client refused an AES-GCM suite: %v", name, err)
		}
	}
}
