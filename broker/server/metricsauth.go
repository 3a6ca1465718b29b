package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// Access to the HTTP listener (metrics.listen). /metrics shows topic
// names, partitions and offsets that ACLs hide from Kafka clients, and
// /debug/pprof/ (metrics.pprof.enable, off by default) the process's
// memory and command line; /healthz and /readyz show nothing and are what
// the kubelet's probes call. With metrics.auth.token.file, a client
// certificate CA (metrics.ssl.ca.location), or both, every path but
// /healthz and /readyz needs a bearer token equal to the file's content,
// or a client certificate that chains to that CA (the listener serves
// HTTPS with metrics.ssl.certificate.location and
// metrics.ssl.key.location; client certificates are asked for, not
// required, so probes without one still reach /healthz and /readyz).
// Anything else is answered 401. Without either, the listener is open as
// before: keep it on a network only monitoring reaches.

// MetricsAccess configures the HTTP listener's access control.
type MetricsAccess struct {
	// TokenFile is metrics.auth.token.file: a file whose content (blanks
	// around it trimmed) is the bearer token; re-read when it changes (a
	// mounted Secret's rotation).
	TokenFile string
	// TLS is metrics.ssl.certificate.location, metrics.ssl.key.location
	// and metrics.ssl.ca.location: with a certificate the listener serves
	// HTTPS; with a CA too, client certificates chaining to it are let
	// in.
	TLS TLSFiles
}

func (a MetricsAccess) protected() bool { return a.TokenFile != "" || a.TLS.CAFile != "" }

// openPaths are served without credentials.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// metricsGuard checks credentials of requests to the HTTP listener.
type metricsGuard struct {
	access  MetricsAccess
	log     logr.Logger
	mu      sync.Mutex
	stamp   fileStamp
	tokenID [sha256.Size]byte // sha256 of the token: compared in constant time, whatever its length
}

// newMetricsGuard checks the settings and reads the token; nil when the
// listener is open.
func newMetricsGuard(a MetricsAccess, log logr.Logger) (*metricsGuard, error) {
	if a.TLS.CAFile != "" && a.TLS.CertFile == "" {
		return nil, errors.New("metrics.ssl.ca.location needs metrics.ssl.certificate.location and metrics.ssl.key.location: client certificates need HTTPS")
	}
	if (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") {
		return nil, errors.New("metrics.ssl.certificate.location and metrics.ssl.key.location go together")
	}
	if !a.protected() {
		return nil, nil
	}
	g := &metricsGuard{access: a, log: log}
	if a.TokenFile != "" {
		if err := g.reloadLocked(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *metricsGuard) reloadLocked() error {
	stamp := stampOf(g.access.TokenFile)
	b, err := os.ReadFile(g.access.TokenFile)
	if err != nil {
		return fmt.Errorf("metrics.auth.token.file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return fmt.Errorf("metrics.auth.token.file %s is empty", g.access.TokenFile)
	}
	g.stamp, g.tokenID = stamp, sha256.Sum256([]byte(tok))
	return nil
}

// tokenOK reports whether the request's bearer token is the file's.
func (g *metricsGuard) tokenOK(r *http.Request) bool {
	if g.access.TokenFile == "" {
		return false
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	g.mu.Lock()
	if stampOf(g.access.TokenFile) != g.stamp {
		if err := g.reloadLocked(); err != nil {
			g.log.Info("metrics.auth.token.file changed but does not load; keeping the previous token", "err", err.Error())
		}
	}
	want := g.tokenID
	g.mu.Unlock()
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// certOK reports whether the connection presented a client certificate
// that chains to metrics.ssl.ca.location (the handshake verified it).
func (g *metricsGuard) certOK(r *http.Request) bool {
	return g.access.TLS.CAFile != "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// wrap lets requests to openPaths through and others only with
// credentials.
func (g *metricsGuard) wrap(next http.Handler) http.Handler {
	if g == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] || g.tokenOK(r) || g.certOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
		http.Error(w, "authentication required: a bearer token (metrics.auth.token.file) or a client certificate (metrics.ssl.ca.location); /healthz and /readyz are open", http.StatusUnauthorized)
	})
}

// metricsTLS is the HTTPS configuration of the listener, nil for HTTP:
// the broker's usual TLS 1.2+ AEAD settings with certificate reload;
// client certificates asked for and verified when given.
func metricsTLS(a MetricsAccess, log logr.Logger) (*tls.Config, error) {
	if a.TLS.CertFile == "" {
		return nil, nil
	}
	files := a.TLS
	files.ClientAuth = ""
	if files.CAFile != "" {
		files.ClientAuth = "requested"
	}
	kp, err := newKeyPair(files, log)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	return kp.serverConfig(), nil
}
