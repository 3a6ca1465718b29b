package server

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/internal/devcerts"
)

// A broker reaches an etcd that requires client certificates
// (--client-cert-auth, as the operator's managed etcd) with
// metadata.etcd.ssl.*; without a certificate, or with one of another CA,
// etcd refuses it. After its certificate files are replaced (a renewal)
// the next connection presents the new certificate.
func TestEtcdClientTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA(dir, "ca", "etcd test CA")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.Issue(dir, "etcd", devcerts.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	brokerCert, brokerKey, err := ca.Issue(dir, "broker", devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := meta.StartEmbedded(ctx, t.TempDir(), nil, func(c *embed.Config) {
		u := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
		c.ListenClientUrls, c.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
		c.ClientTLSInfo = transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: ca.CertFile, ClientCertAuth: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	endpoints := []string{"https://" + e.ClientAddr}

	connect := func(files TLSFiles) error {
		kp, err := newKeyPair(files, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		defer ccancel()
		s, err := meta.Connect(cctx, meta.ClientConfig{Endpoints: endpoints, Cluster: "tls", DialTimeout: 3 * time.Second, TLS: kp.etcdClientConfig()})
		if err == nil {
			_ = s.Close()
		}
		return err
	}
	good := TLSFiles{CertFile: brokerCert, KeyFile: brokerKey, CAFile: ca.CertFile}
	if err := connect(good); err != nil {
		t.Fatalf("broker with a certificate of the CA: %v", err)
	}

	other, err := devcerts.NewCA(t.TempDir(), "other", "foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, err := other.Issue(dir, "foreign", devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := connect(TLSFiles{CertFile: foreignCert, KeyFile: foreignKey, CAFile: ca.CertFile}); err == nil {
		t.Fatal("a client certificate of a foreign CA was accepted")
	}
	// A server certificate from another CA than the one trusted.
	if err := connect(TLSFiles{CertFile: brokerCert, KeyFile: brokerKey, CAFile: other.CertFile}); err == nil {
		t.Fatal("an etcd certificate of an untrusted CA was accepted")
	}

	// Renewal: the files are replaced under the same names; a key pair
	// loaded before sees the new certificate at its next handshake.
	kp, err := newKeyPair(good, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	before, _ := kp.current()
	renewedAt := time.Now().Add(time.Second)
	if _, _, err := ca.Issue(dir, "broker", devcerts.Options{}); err != nil {
		t.Fatal(err)
	}
	// The stamp check compares size and mtime; make sure mtime moves.
	for _, f := range []string{brokerCert, brokerKey} {
		if err := os.Chtimes(f, renewedAt, renewedAt); err != nil {
			t.Fatal(err)
		}
	}
	cfg := kp.etcdClientConfig()
	after, err := cfg.GetClientCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Certificate[0]) == string(before.Certificate[0]) {
		t.Fatal("the etcd client certificate was not re-read after the files changed")
	}
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	s, err := meta.Connect(cctx, meta.ClientConfig{Endpoints: endpoints, Cluster: "tls", DialTimeout: 3 * time.Second, TLS: cfg})
	if err != nil {
		t.Fatalf("after renewal: %v", err)
	}
	_ = s.Close()
}
