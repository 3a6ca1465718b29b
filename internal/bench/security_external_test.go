package bench

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/devcerts"
)

// TestExternalSASLSSL: `strata bench --bootstrap` against a SASL_SSL
// listener (an operator's cluster by default) connects with the given
// client settings (LoadOptions.Security, from --tls-ca-file and --sasl-*).
func TestExternalSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA(dir, "ca", "bench test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t,
		brokertest.WithSetting("listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"),
		brokertest.WithSetting("listener.name.sasl_ssl.ssl.certificate.location", cert),
		brokertest.WithSetting("listener.name.sasl_ssl.ssl.key.location", key))
	// The user, set over the PLAINTEXT listener (no authorizer).
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const user, password = "bench", "bench-secret"
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(context.Background(), nil,
		[]kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("set SCRAM credential: %v", err)
	}

	lo := DefaultLoadOptions()
	lo.Partitions, lo.Warmup, lo.Duration, lo.RecordSize, lo.Consumers = 2, 200*time.Millisecond, time.Second, 256, 1
	lo.Security = &ClientSecurity{CAFile: ca.CertFile, Mechanism: "SCRAM-SHA-512", User: user, Password: password}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Bootstrap: []string{b.Server().ListenerAddr("SASL_SSL")}, Load: lo})
	if err != nil {
		t.Fatalf("bench over SASL_SSL: %v", err)
	}
	if m := rep.Modes[0]; m.Produced == 0 || m.Consumed == 0 {
		t.Fatalf("produced %d consumed %d over SASL_SSL", m.Produced, m.Consumed)
	}
}
