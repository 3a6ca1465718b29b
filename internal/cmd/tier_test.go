package cmd

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestTierInspect uploads a partition's segments to a real bucket and
// lists its manifest with `strata tier inspect`, then damages one segment
// and checks that --verify names it and fails.
func TestTierInspect(t *testing.T) {
	srv := s3server.Start(t, "strata-tier")
	ctx := context.Background()
	st, err := objstore.NewS3(ctx, objstore.Config{Bucket: "strata-tier", Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 1000
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 12 {
		spec := record.DefaultSpec()
		spec.BaseTimestamp = 1_700_000_000_000 + int64(i)
		b, err := record.Build(spec, []record.Record{{Value: bytes.Repeat([]byte("x"), 300)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader([]record.Batch{b}, 3); err != nil {
			t.Fatal(err)
		}
	}
	id := hex.EncodeToString(bytes.Repeat([]byte{0xab}, 16))
	p := tier.New(st, tier.Config{Cluster: "ns/prod"}, logr.Discard()).Partition("orders", id, 2)
	res, err := p.Upload(ctx, l, l.EndOffset(), 3)
	if err != nil || res.Segments == 0 {
		t.Fatalf("upload: %+v, %v", res, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	out, err := runStrata(t, "tier", "inspect", "--endpoint", srv.Endpoint, "--verify", "s3://strata-tier", "orders", "2")
	if err != nil {
		t.Fatalf("tier inspect: %v\n%s", err, out)
	}
	m, _ := p.Manifest()
	for _, want := range []string{"tier/ns/prod/orders-" + id + "/2/", fmt.Sprintf("epoch 3 seq %d, offsets [0, %d), %d segments", m.Seq, m.EndOffset, len(m.Segments)),
		m.Segments[0].Key, " ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A damaged segment fails --verify, named.
	if err := st.Put(ctx, p.Prefix()+m.Segments[0].Key, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	out, err = runStrata(t, "tier", "inspect", "--endpoint", srv.Endpoint, "--verify", "s3://strata-tier", "orders", "2")
	if err == nil || !strings.Contains(out, "corrupt") {
		t.Fatalf("inspect of a damaged segment: %v\n%s", err, out)
	}
	if _, err := runStrata(t, "tier", "inspect", "--endpoint", srv.Endpoint, "s3://strata-tier", "orders", "7"); err == nil || !strings.Contains(err.Error(), "no manifest of orders-7") {
		t.Fatalf("inspect of a partition without a manifest: %v", err)
	}
}
