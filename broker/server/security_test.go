package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/internal/devcerts"
)

// secureFixture is a CA with a broker certificate, and the settings of a
// standalone broker with four listeners: PLAINTEXT (cfg.Listen), SASL_SSL
// (SCRAM and PLAIN), SASL_PLAINTEXT and MTLS (SSL, client certificates
// required, CN mapped to the principal).
type secureFixture struct {
	dir      string
	ca       *devcerts.CA
	cert     string
	key      string
	settings map[string]string
}

func newSecureFixture(t *testing.T) *secureFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := devcerts.NewCA(dir, "ca", "strata test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	return &secureFixture{dir: dir, ca: ca, cert: cert, key: key, settings: map[string]string{
		"listeners":                                      "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
		"listener.security.protocol.map":                 "MTLS:SSL",
		"ssl.certificate.location":                       cert,
		"ssl.key.location":                               key,
		"ssl.ca.location":                                ca.CertFile,
		"listener.name.mtls.ssl.client.auth":             "required",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
		"ssl.principal.mapping.rules":                    `RULE:^CN=([^,]+),O=clients$/$1/L,DEFAULT`,
	}}
}

func (f *secureFixture) start(t *testing.T, extra map[string]string) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Broker.DataDir = filepath.Join(f.dir, "data")
	kv := map[string]string{}
	for k, v := range f.settings {
		kv[k] = v
	}
	for k, v := range extra {
		kv[k] = v
	}
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

func (f *secureFixture) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(f.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func addUser(t *testing.T, addr, user, password string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %s: %v", r.User, r.Err)
		}
	}
}

// roundTrip produces one record to topic and reads it back.
func roundTrip(ctx context.Context, topic string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("secret")}).FirstErr(); err != nil {
		return err
	}
	return firstRecord(ctx, cl)
}

// firstRecord polls cl until it returns a record (nil) or a fetch error.
func firstRecord(ctx context.Context, cl *kgo.Client) error {
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		if fs.NumRecords() > 0 {
			return nil
		}
	}
}

func TestSecureListeners(t *testing.T) {
	f := newSecureFixture(t)
	s := f.start(t, nil)
	addUser(t, s.Addr(), "alice", "alice-secret")
	saslSSL := s.ListenerAddr("SASL_SSL")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("scram-sha-512 over SASL_SSL", func(t *testing.T) {
		if err := roundTrip(ctx, "s512", kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(f.clientTLS(t)),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metadata advertises the listener connected on", func(t *testing.T) {
		for _, name := range []string{"PLAINTEXT", "SASL_PLAINTEXT"} {
			opts := []kgo.Opt{kgo.SeedBrokers(s.ListenerAddr(name))}
			if name == "SASL_PLAINTEXT" {
				opts = append(opts, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			got := net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port)))
			if len(resp.Brokers) != 1 || got != s.ListenerAddr(name) {
				t.Errorf("%s: metadata advertises %s, want %s", name, got, s.ListenerAddr(name))
			}
		}
	})
	t.Run("PLAIN over SASL_SSL", func(t *testing.T) {
		if err := roundTrip(ctx, "plain", kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(f.clientTLS(t)),
			kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		for _, mech := range []kgo.Opt{
			kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()),
			kgo.SASL(scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism()),
			kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()),
		} {
			err := firstRequest(kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(f.clientTLS(t)), mech)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		}
	})
	t.Run("mTLS principal", func(t *testing.T) {
		cert, key, err := f.ca.Issue(f.dir, "client", devcerts.Options{Subject: pkix.Name{CommonName: "Bob", Organization: []string{"clients"}}})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg := f.clientTLS(t)
		cfg.Certificates = []tls.Certificate{pair}
		if err := roundTrip(ctx, "mtls", kgo.SeedBrokers(s.ListenerAddr("MTLS")), kgo.DialTLSConfig(cfg)); err != nil {
			t.Fatal(err)
		}
		if p := principalOf(t, s, cfg); p != "User:bob" {
			t.Errorf("principal %q, want User:bob (RULE lower-cases the CN)", p)
		}
	})
	t.Run("refused certificates", func(t *testing.T) {
		other, err := devcerts.NewCA(t.TempDir(), "other", "foreign CA")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		foreignCert, foreignKey, _ := other.Issue(dir, "foreign", devcerts.Options{})
		expiredCert, expiredKey, _ := f.ca.Issue(dir, "expired", devcerts.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
		for name, files := range map[string][2]string{"foreign": {foreignCert, foreignKey}, "expired": {expiredCert, expiredKey}, "none": {}} {
			cfg := f.clientTLS(t)
			if files[0] != "" {
				pair, err := tls.LoadX509KeyPair(files[0], files[1])
				if err != nil {
					t.Fatal(err)
				}
				// Sent even when it does not chain to a CA the broker
				// names (Go's client would otherwise send none).
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			}
			err := tlsExchange(s.ListenerAddr("MTLS"), cfg)
			if err == nil {
				t.Errorf("%s client certificate: accepted", name)
			}
			t.Logf("%s client certificate: %v", name, err)
		}
	})
	t.Run("plaintext to a TLS port", func(t *testing.T) {
		err := firstRequest(kgo.SeedBrokers(saslSSL), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
		t.Logf("plaintext client: %v", err)
		if err == nil {
			t.Fatal("plaintext client served on SASL_SSL")
		}
	})
	t.Run("requests before authentication close the connection", func(t *testing.T) {
		for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()} {
			nc, err := net.Dial("tcp", s.ListenerAddr("SASL_PLAINTEXT"))
			if err != nil {
				t.Fatal(err)
			}
			w := &wire{nc: nc, rd: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
			if _, err := w.roundTrip(req); err == nil {
				t.Errorf("%s answered before authentication", kmsg.NameForKey(req.Key()))
			}
			nc.Close()
		}
	})
	t.Run("describe SCRAM credentials", func(t *testing.T) {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
		defer cl.Close()
		d, err := kadm.NewClient(cl).DescribeUserSCRAMs(ctx, "alice", "nobody")
		if err != nil {
			t.Fatal(err)
		}
		if a := d["alice"]; a.Err != nil || len(a.CredInfos) != 2 || a.CredInfos[1].Iterations != 8192 {
			t.Errorf("alice: %+v", a)
		}
		if n := d["nobody"]; !errors.Is(n.Err, kerr.ResourceNotFound) {
			t.Errorf("nobody: %v, want RESOURCE_NOT_FOUND", n.Err)
		}
	})
}

// firstRequest makes one Metadata request and returns its error: a client
// refused at authentication sees it there (franz-go does not retry
// SASL_AUTHENTICATION_FAILED for a direct request).
func firstRequest(opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// principalOf returns the principal the broker gave a new connection made
// with cfg (the newest connection of the server).
func principalOf(t *testing.T, s *Server, cfg *tls.Config) string {
	t.Helper()
	nc, err := tls.Dial("tcp", s.ListenerAddr("MTLS"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := &wire{nc: nc, rd: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	// SaslHandshake on an SSL listener answers ILLEGAL_SASL_STATE and
	// carries no principal; ApiVersions proves the connection is served.
	if _, err := w.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatal(err)
	}
	clients := s.proto.Clients()
	return string(clients[len(clients)-1].Principal())
}

// tlsExchange opens a TLS connection and makes one request: with TLS 1.3
// a refused client certificate shows at the first read, not the handshake.
func tlsExchange(addr string, cfg *tls.Config) error {
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	w := &wire{nc: nc, rd: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	_, err = w.roundTrip(kmsg.NewPtrApiVersionsRequest())
	return err
}

func TestSASLSessionExpires(t *testing.T) {
	f := newSecureFixture(t)
	s := f.start(t, map[string]string{"connections.max.reauth.ms": "1000"})
	addUser(t, s.Addr(), "alice", "alice-secret")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// franz-go re-authenticates before the session ends (KIP-368): it keeps
	// producing across several lifetimes on the same connection.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.ListenerAddr("SASL_PLAINTEXT")), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("reauth"),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reauths := func() int {
		_, m := get(t, "http://"+s.MetricsAddr()+"/metrics")
		for _, line := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(line, `strata_requests_total{api="SASLAuthenticate"} `); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	for reauths() < 4 { // two re-authentications of two SCRAM steps each
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce after %d re-authentication requests: %v", reauths(), err)
		}
	}

	// A client that does not re-authenticate is cut off at its next
	// request after the session ends.
	nc, err := net.Dial("tcp", s.ListenerAddr("SASL_PLAINTEXT"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := saslClient(ctx, nc, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	w := &wire{nc: nc, rd: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := w.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
			break // closed by the broker
		}
		if time.Now().After(deadline) {
			t.Fatal("connection still served 30s after a 1s session ended")
		}
	}
}

func TestCertificateReload(t *testing.T) {
	f := newSecureFixture(t)
	s := f.start(t, nil)
	addr := s.ListenerAddr("SASL_SSL")
	serial := func() *big.Int {
		nc, err := tls.Dial("tcp", addr, f.clientTLS(t))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return nc.ConnectionState().PeerCertificates[0].SerialNumber
	}
	before := serial()
	// Renewal: new certificate and key written over the files.
	if _, _, err := f.ca.Issue(f.dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for serial().Cmp(before) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the listener still presents the old certificate")
		}
	}
}

// TestInterBrokerSASLSSL runs two brokers whose only listener is SASL_SSL
// (the inter-broker listener too): acks=all needs the follower's replica
// fetches, which authenticate with the broker's own SCRAM user.
func TestInterBrokerSASLSSL(t *testing.T) {
	f := newSecureFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servers, _, stop := startSCRAMCluster(ctx, t, f.dir, "sec", 2, []string{"broker", "alice"}, map[string]string{
		"listeners":                            "SASL_SSL://127.0.0.1:0",
		"ssl.certificate.location":             f.cert,
		"ssl.key.location":                     f.key,
		"ssl.ca.location":                      f.ca.CertFile,
		"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
		"inter.broker.sasl.username":           "broker",
		"inter.broker.sasl.password":           "broker-secret",
	})
	defer stop()
	opts := []kgo.Opt{kgo.SeedBrokers(servers[0].Addr()), kgo.DialTLSConfig(f.clientTLS(t)),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, "replicated"); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(ctx, "replicated", append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...); err != nil {
		t.Fatalf("acks=all over SASL_SSL replication: %v", err)
	}
	// acks=all also completes once an unreachable follower drops out of
	// the ISR (replica.lag.time.max.ms): the follower must still be in it.
	td, err := kadm.NewClient(cl).ListTopics(ctx, "replicated")
	if err != nil {
		t.Fatal(err)
	}
	if isr := td["replicated"].Partitions[0].ISR; len(isr) != 2 {
		t.Fatalf("ISR %v after acks=all: the follower did not replicate over SASL_SSL", isr)
	}
}

// startSCRAMCluster starts n in-process brokers (rack z<id>) of cluster
// name on an embedded etcd under dir, with settings applied to each and
// the SCRAM users seeded (password <user>-secret). stop shuts the
// brokers down, then the store and etcd.
func startSCRAMCluster(ctx context.Context, t *testing.T, dir, name string, n int, users []string, settings map[string]string) (servers []*Server, store *meta.Store, stop func()) {
	t.Helper()
	etcd, err := meta.StartEmbedded(ctx, filepath.Join(dir, "etcd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err = meta.Connect(ctx, meta.ClientConfig{Endpoints: etcd.Endpoints, Cluster: name})
	if err != nil {
		etcd.Close()
		t.Fatal(err)
	}
	stop = func() {
		for _, s := range servers {
			_ = s.Shutdown(context.Background())
		}
		store.Close()
		etcd.Close()
	}
	for _, u := range users {
		seedScramUser(t, store, u, u+"-secret")
	}
	for id := range n {
		cfg := DefaultConfig()
		cfg.MetricsListen = ""
		cfg.Broker.NodeID = int32(id)
		cfg.Broker.Rack = "z" + strconv.Itoa(id)
		cfg.Broker.DataDir = filepath.Join(dir, "b"+strconv.Itoa(id))
		cfg.Cluster.EtcdEndpoints, cfg.Cluster.Name = etcd.Endpoints, name
		cfg.Cluster.SessionTimeout = 3 * time.Second
		// ApplySettings may keep the map: each broker gets its own copy.
		if _, err := ApplySettings(&cfg, maps.Clone(settings)); err != nil {
			stop()
			t.Fatal(err)
		}
		s, err := Start(ctx, cfg, logr.Discard())
		if err != nil {
			stop()
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	return servers, store, stop
}

func seedScramUser(t *testing.T, store auth.CredentialStore, user, password string) {
	t.Helper()
	ups := map[auth.Mechanism]auth.Credential{}
	for _, m := range auth.Mechanisms {
		c, err := auth.NewCredential(m, password, 4096)
		if err != nil {
			t.Fatal(err)
		}
		ups[m] = c
	}
	if err := store.AlterScram(context.Background(), user, ups, nil); err != nil {
		t.Fatal(err)
	}
}
