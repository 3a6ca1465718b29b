package cmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestDevSecurity: `strata dev --security` prints the CA, mechanism, user
// and password before the ready line; a client with them produces with
// acks=all (the followers replicate over SASL_SSL as strata-broker), a
// wrong password is refused.
func TestDevSecurity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := newDevCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--security", "--replication", "classic", "--listen", "127.0.0.1:0", "--metrics-listen", ""})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(runCtx)
		pw.Close()
		done <- err
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	secLine := regexp.MustCompile(`^strata dev security: ca=(\S+) mechanism=SCRAM-SHA-512 user=(\S+) password=(\S+)$`)
	ready := regexp.MustCompile(`^strata dev ready: bootstrap=(\S+)$`)
	sc := bufio.NewScanner(pr)
	var bootstrap, sec []string
	for sc.Scan() {
		if m := secLine.FindStringSubmatch(sc.Text()); m != nil {
			sec = m
		}
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			bootstrap = strings.Split(m[1], ",")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if bootstrap == nil || sec == nil {
		t.Fatalf("security line %v, bootstrap %v", sec, bootstrap)
	}
	pem, err := os.ReadFile(sec[1])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in", sec[1])
	}
	opts := func(password string) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(scram.Auth{User: sec[2], Pass: password}.AsSha512Mechanism())}
	}
	cl, err := kgo.NewClient(append(opts(sec[3]), kgo.DefaultProduceTopic("secured"), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// ACLs are on and the printed user is a super user: it may grant.
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:reader").Topics("secured").Operations(kadm.OpRead))
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("the dev user creates an ACL: %v", err)
	}
	bad, err := kgo.NewClient(append(opts("wrong"), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
