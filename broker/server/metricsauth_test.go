package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/internal/devcerts"
)

func startMetrics(t *testing.T, kv map[string]string) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Broker.DataDir = t.TempDir()
	if _, err := ApplySettings(&cfg, kv); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// fetchWith GETs url with client and, if token is set, a bearer token.
func fetchWith(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsAccessControl (issue 26 item 7: /metrics needed no login and
// showed topic names and offsets ACLs hide): pprof is not served unless
// metrics.pprof.enable; with metrics.auth.token.file, /metrics and
// /debug/pprof/ answer 401 without the token or with another one and 200
// with it (a rotated token file is picked up), while /healthz and /readyz
// stay open; with metrics.ssl.* the listener serves HTTPS and a client
// certificate of metrics.ssl.ca.location is let in where a client without
// one is not; a CA without a certificate of the listener's own stops the
// broker at start.
func TestMetricsAccessControl(t *testing.T) {
	t.Run("open, pprof off", func(t *testing.T) {
		s := startMetrics(t, nil)
		base := "http://" + s.MetricsAddr()
		if code, _ := fetchWith(t, http.DefaultClient, base+"/debug/pprof/", ""); code != http.StatusNotFound {
			t.Errorf("/debug/pprof/ without metrics.pprof.enable: %d, want 404", code)
		}
		if code, _ := fetchWith(t, http.DefaultClient, base+"/metrics", ""); code != http.StatusOK {
			t.Errorf("/metrics without access control: %d", code)
		}
	})

	t.Run("bearer token", func(t *testing.T) {
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := startMetrics(t, map[string]string{"metrics.auth.token.file": tokenFile, "metrics.pprof.enable": "true"})
		base := "http://" + s.MetricsAddr()
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, _ := fetchWith(t, http.DefaultClient, base+path, ""); code == http.StatusUnauthorized {
				t.Errorf("%s refused without a token: probes must reach it", path)
			}
		}
		for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/cmdline", "/nothing"} {
			for _, token := range []string{"", "wrong", "s3cret-token-and-more"} {
				if code, body := fetchWith(t, http.DefaultClient, base+path, token); code != http.StatusUnauthorized || strings.Contains(body, "strata_") {
					t.Errorf("%s with token %q: %d, want 401", path, token, code)
				}
			}
		}
		if code, body := fetchWith(t, http.DefaultClient, base+"/metrics", "s3cret-token"); code != http.StatusOK || !strings.Contains(body, "strata_broker_ready") {
			t.Errorf("/metrics with the token: %d", code)
		}
		if code, _ := fetchWith(t, http.DefaultClient, base+"/debug/pprof/", "s3cret-token"); code != http.StatusOK {
			t.Errorf("/debug/pprof/ with the token and metrics.pprof.enable: %d", code)
		}
		// Rotated: the old token is refused, the new one let in.
		if err := os.WriteFile(tokenFile, []byte("rotated-token-2"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _ := fetchWith(t, http.DefaultClient, base+"/metrics", "s3cret-token"); code != http.StatusUnauthorized {
			t.Errorf("/metrics with the token before rotation: %d, want 401", code)
		}
		if code, _ := fetchWith(t, http.DefaultClient, base+"/metrics", "rotated-token-2"); code != http.StatusOK {
			t.Errorf("/metrics with the rotated token: %d", code)
		}
	})

	t.Run("client certificates", func(t *testing.T) {
		dir := t.TempDir()
		ca, err := devcerts.NewCA(dir, "ca", "metrics CA")
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		clientCert, clientKey, err := ca.Issue(dir, "prometheus", devcerts.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := startMetrics(t, map[string]string{
			"metrics.ssl.certificate.location": cert, "metrics.ssl.key.location": key, "metrics.ssl.ca.location": ca.CertFile,
		})
		pem, err := os.ReadFile(ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		client := func(certs ...tls.Certificate) *http.Client {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		}
		pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
		if err != nil {
			t.Fatal(err)
		}
		base := "https://" + s.MetricsAddr()
		anon, withCert := client(), client(pair)
		if code, _ := fetchWith(t, anon, base+"/healthz", ""); code != http.StatusOK {
			t.Errorf("/healthz over HTTPS without a client certificate: %d", code)
		}
		if code, _ := fetchWith(t, anon, base+"/metrics", ""); code != http.StatusUnauthorized {
			t.Errorf("/metrics without a client certificate: %d, want 401", code)
		}
		if code, body := fetchWith(t, withCert, base+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "strata_broker_ready") {
			t.Errorf("/metrics with a client certificate of the CA: %d", code)
		}
		if code, _ := fetchWith(t, withCert, base+"/debug/pprof/", ""); code != http.StatusNotFound {
			t.Errorf("/debug/pprof/ with a certificate but without metrics.pprof.enable: %d, want 404", code)
		}
	})

	t.Run("refused settings", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.MetricsListen = "127.0.0.1:0"
		cfg.Broker.DataDir = t.TempDir()
		for _, a := range []MetricsAccess{
			{TLS: TLSFiles{CAFile: "/some/ca.crt"}},
			{TLS: TLSFiles{CertFile: "/some/cert.pem"}},
			{TokenFile: filepath.Join(t.TempDir(), "missing")},
		} {
			cfg.MetricsAccess = a
			if s, err := Start(context.Background(), cfg, logr.Discard()); err == nil {
				_ = s.Shutdown(context.Background())
				t.Errorf("started with %+v", a)
			}
		}
	})
}
