package compat

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/devcerts"
)

// secureBroker is a broker with a PLAINTEXT listener (for the test's own
// admin calls), a SASL_SSL listener (SCRAM-SHA-256/512 and PLAIN) and an
// MTLS listener (SSL, client certificates required), certificates from a
// throw-away CA, and the SCRAM user alice.
type secureBroker struct {
	b        *brokertest.Broker
	ca       *devcerts.CA
	dir      string
	saslSSL  string
	mtls     string
	user     string
	password string
}

func startSecureBroker(t *testing.T, opts ...brokertest.Option) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	ca, err := devcerts.NewCA(dir, "ca", "strata compat CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t, append([]brokertest.Option{
		brokertest.WithSetting("listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0"),
		brokertest.WithSetting("listener.security.protocol.map", "MTLS:SSL"),
		brokertest.WithSetting("ssl.certificate.location", cert),
		brokertest.WithSetting("ssl.key.location", key),
		brokertest.WithSetting("ssl.ca.location", ca.CertFile),
		brokertest.WithSetting("listener.name.mtls.ssl.client.auth", "required"),
		brokertest.WithSetting("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"),
		brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"),
	}, opts...)...)
	sb := &secureBroker{b: b, ca: ca, dir: dir, saslSSL: b.Server().ListenerAddr("SASL_SSL"), mtls: b.Server().ListenerAddr("MTLS"),
		user: "alice", password: "alice-secret-1"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: sb.user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: sb.password},
		{User: sb.user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: sb.password},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func (sb *secureBroker) kcatArgs(mech, password string) []string {
	return []string{"-b", sb.saslSSL, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=" + sb.user, "-X", "sasl.password=" + password, "-X", "ssl.ca.location=" + sb.ca.CertFile}
}

func run(t *testing.T, stdin string, path string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestSecureKcatSCRAM512(t *testing.T) {
	kcat := kcatPath(t)
	sb := startSecureBroker(t)
	args := sb.kcatArgs("SCRAM-SHA-512", sb.password)
	if _, stderr, err := run(t, "a\nb\nc\n", kcat, append(args, "-P", "-t", "kcat-secure", "-X", "acks=all")...); err != nil {
		t.Fatalf("kcat produce: %v: %s", err, stderr)
	}
	out, stderr, err := run(t, "", kcat, append(args, "-C", "-t", "kcat-secure", "-o", "beginning", "-e", "-q")...)
	if err != nil || out != "a\nb\nc\n" {
		t.Fatalf("kcat consume: %q, %v: %s", out, err, stderr)
	}
}

// TestSecureKcatACLs: with ACLs on, kcat (librdkafka) over SASL_SSL +
// SCRAM-SHA-512 produces to and consumes from the topic alice was granted,
// and sees TOPIC_AUTHORIZATION_FAILED on the one she was not. The test's
// own admin calls go over the PLAINTEXT listener as User:ANONYMOUS, made a
// super user here only.
func TestSecureKcatACLs(t *testing.T) {
	kcat := kcatPath(t)
	sb := startSecureBroker(t,
		brokertest.WithSetting("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
		brokertest.WithSetting("super.users", "User:ANONYMOUS"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, topic := range []string{"kcat-granted", "kcat-forbidden"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:"+sb.user).Topics("kcat-granted").Operations(kadm.OpWrite, kadm.OpRead))
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	args := sb.kcatArgs("SCRAM-SHA-512", sb.password)
	if _, stderr, err := run(t, "a\nb\n", kcat, append(args, "-P", "-t", "kcat-granted", "-X", "acks=all")...); err != nil {
		t.Fatalf("kcat produce to a granted topic: %v: %s", err, stderr)
	}
	out, stderr, err := run(t, "", kcat, append(args, "-C", "-t", "kcat-granted", "-o", "beginning", "-e", "-q")...)
	if err != nil || out != "a\nb\n" {
		t.Fatalf("kcat consume from a granted topic: %q, %v: %s", out, err, stderr)
	}
	_, stderr, err = run(t, "x\n", kcat, append(args, "-P", "-t", "kcat-forbidden", "-X", "acks=all")...)
	if err == nil || !strings.Contains(stderr, "Topic authorization failed") {
		t.Fatalf("kcat produce to a forbidden topic: %v, stderr:\n%s", err, stderr)
	}
}

// TestSecureRefusals: each client must see the refusal as an
// authentication or TLS error, not a timeout.
func TestSecureRefusals(t *testing.T) {
	kcat := kcatPath(t)
	sb := startSecureBroker(t)
	other, err := devcerts.NewCA(t.TempDir(), "other", "foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, err := other.Issue(sb.dir, "foreign", devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expiredCert, expiredKey, err := sb.ca.Issue(sb.dir, "expired", devcerts.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	mtls := func(cert, key string) []string {
		return []string{"-b", sb.mtls, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + sb.ca.CertFile,
			"-X", "ssl.certificate.location=" + cert, "-X", "ssl.key.location=" + key}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in kcat's stderr
	}{
		{"wrong password", sb.kcatArgs("SCRAM-SHA-512", "not-the-password"), "Authentication failed"},
		{"unknown user PLAIN", append(sb.kcatArgs("PLAIN", "x"), "-X", "sasl.username=mallory"), "Authentication failed"},
		{"plaintext to the TLS port", []string{"-b", sb.saslSSL, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=" + sb.password}, "Disconnected"},
		{"foreign client certificate", mtls(foreignCert, foreignKey), "SSL"},
		{"expired client certificate", mtls(expiredCert, expiredKey), "SSL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each refusal waits out kcat's 10 s metadata timeout: the
			// cases run side by side.
			t.Parallel()
			_, stderr, err := run(t, "", kcat, append(tc.args, "-L", "-m", "10")...)
			if err == nil {
				t.Fatalf("kcat -L succeeded; stderr: %s", stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("kcat stderr lacks %q:\n%s", tc.want, stderr)
			}
			t.Logf("refused: %s", firstLine(stderr, tc.want))
		})
	}
}

func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestSecureConfluentSCRAM256(t *testing.T) {
	py := pythonPath(t)
	sb := startSecureBroker(t)
	out, stderr, err := run(t, "", py, "secure_clients.py", "confluent", sb.saslSSL, "confluent-secure", sb.ca.CertFile, "SCRAM-SHA-256", sb.user, sb.password)
	if err != nil || !strings.Contains(out, "ok 10") {
		t.Fatalf("confluent-kafka-python SASL_SSL SCRAM-SHA-256: %v %s\n%s", err, out, stderr)
	}
}

func TestSecureKafkaPythonPlain(t *testing.T) {
	py := pythonPath(t)
	sb := startSecureBroker(t)
	out, stderr, err := run(t, "", py, "secure_clients.py", "kafkapython", sb.saslSSL, "kafkapython-secure", sb.ca.CertFile, "PLAIN", sb.user, sb.password)
	if err != nil || !strings.Contains(out, "ok 10") {
		t.Fatalf("kafka-python SASL_SSL PLAIN: %v %s\n%s", err, out, stderr)
	}
	// A wrong password: kafka-python (SaslHandshake v0, raw tokens) sees
	// the connection closed during authentication.
	_, stderr, err = run(t, "", py, "secure_clients.py", "kafkapython", sb.saslSSL, "kafkapython-secure", sb.ca.CertFile, "PLAIN", sb.user, "wrong")
	if err == nil {
		t.Fatal("kafka-python authenticated with a wrong password")
	}
	t.Logf("wrong password: %s", lastLine(stderr))
}

// TestSecureKafkaPythonACLs manages ACLs with kafka-python's admin client
// (CreateAcls, DescribeAcls, DeleteAcls at the versions it speaks) as a
// super user over SASL_SSL PLAIN.
func TestSecureKafkaPythonACLs(t *testing.T) {
	py := pythonPath(t)
	sb := startSecureBroker(t,
		brokertest.WithSetting("authorizer.class.name", "strata.acl"),
		brokertest.WithSetting("super.users", "User:ANONYMOUS;User:alice"))
	out, stderr, err := run(t, "", py, "secure_clients.py", "kafkapython-acls", sb.saslSSL, "py-acl", sb.ca.CertFile, "PLAIN", sb.user, sb.password)
	if err != nil || !strings.Contains(out, "ok acls") {
		t.Fatalf("kafka-python ACL admin: %v %s\n%s", err, out, stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestSecureFranzGoMTLS(t *testing.T) {
	sb := startSecureBroker(t)
	cert, key, err := sb.ca.Issue(sb.dir, "client", devcerts.Options{Subject: pkix.Name{CommonName: "franz"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(sb.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.mtls), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("mtls"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ConsumeTopics("mtls"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over mTLS")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		if fs.NumRecords() > 0 {
			break
		}
	}
	clients := sb.b.Server().Clients()
	if p := clients[len(clients)-1].Principal(); p != "User:CN=franz" {
		t.Errorf("principal %q, want User:CN=franz (DEFAULT mapping)", p)
	}
}
