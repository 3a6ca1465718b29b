package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
)

func TestPickDefragMember(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policy := DefragPolicy{MinFreeBytes: 100, MinFreeRatio: 0.5, MinInterval: time.Hour}
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	m := func(ep string, size, inUse int64, last *metav1.Time) strata.MetadataMemberHealth {
		return strata.MetadataMemberHealth{Endpoint: ep, Healthy: true, DBSizeBytes: size, DBSizeInUseBytes: inUse, LastDefragTime: last}
	}
	for _, tc := range []struct {
		name    string
		members []strata.MetadataMemberHealth
		want    int // -1: none
	}{
		{"no members", nil, -1},
		{"nothing free", []strata.MetadataMemberHealth{m("a", 1000, 1000, nil)}, -1},
		{"below the ratio", []strata.MetadataMemberHealth{m("a", 1000, 600, nil)}, -1},
		{"below the byte floor", []strata.MetadataMemberHealth{m("a", 150, 60, nil)}, -1},
		{"exactly at both thresholds", []strata.MetadataMemberHealth{m("a", 200, 100, nil)}, 0},
		{"the member with most free bytes", []strata.MetadataMemberHealth{m("a", 1000, 400, nil), m("b", 2000, 500, nil), m("c", 1000, 100, nil)}, 1},
		{"tie goes to the first", []strata.MetadataMemberHealth{m("a", 1000, 100, nil), m("b", 1000, 100, nil)}, 0},
		{"defragmented within the hour: skipped", []strata.MetadataMemberHealth{m("a", 2000, 100, at(59*time.Minute)), m("b", 1000, 100, nil)}, 1},
		{"defragmented an hour ago: eligible again", []strata.MetadataMemberHealth{m("a", 2000, 100, at(time.Hour)), m("b", 1000, 100, nil)}, 0},
		{"all recently defragmented", []strata.MetadataMemberHealth{m("a", 2000, 100, at(time.Minute))}, -1},
		{"an unhealthy member stops all defragmentation", []strata.MetadataMemberHealth{m("a", 2000, 100, nil), {Endpoint: "b", Error: "refused"}}, -1},
		{"a corrupt size (in use above size) is ignored", []strata.MetadataMemberHealth{m("a", 100, 5000, nil)}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PickDefragMember(tc.members, policy, now)
			if ok != (tc.want >= 0) || (ok && got != tc.want) {
				t.Fatalf("PickDefragMember = %d, %v; want %d", got, ok, tc.want)
			}
		})
	}
}

// TestEtcdProberDefragment runs the prober against a real (embedded) etcd:
// after writes, deletes and a compaction the backend has free pages, the
// default policy picks the member, and Defragment gives them back.
func TestEtcdProberDefragment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	em, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(em.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: em.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer cli.Close()
	if err := FreeEtcdPages(ctx, cli); err != nil {
		t.Fatal(err)
	}

	p := EtcdProber{}
	before := p.Probe(ctx, em.Endpoints)
	if before.HealthyMembers != 1 || len(before.Members) != 1 {
		t.Fatalf("probe before: %+v", before)
	}
	i, ok := PickDefragMember(before.Members, DefaultDefragPolicy, time.Now())
	if !ok || i != 0 {
		t.Fatalf("default policy does not pick the member: %+v", before.Members[0])
	}
	if err := p.Defragment(ctx, em.Endpoints, before.Members[i].Endpoint); err != nil {
		t.Fatalf("defragment: %v", err)
	}
	after := p.Probe(ctx, em.Endpoints)
	if after.Members[0].DBSizeBytes >= before.Members[0].DBSizeBytes-DefaultDefragPolicy.MinFreeBytes {
		t.Fatalf("db size %d after defragmentation, %d before (in use %d)", after.Members[0].DBSizeBytes, before.Members[0].DBSizeBytes, before.Members[0].DBSizeInUseBytes)
	}
	if _, ok := PickDefragMember(after.Members, DefaultDefragPolicy, time.Now()); ok {
		t.Fatalf("defragmented member picked again: %+v", after.Members[0])
	}
}

// FreeEtcdPages leaves ~190 MiB of free pages in an etcd backend: values
// written over and over, deleted, and the history compacted. The envtest
// suite uses it too.
func FreeEtcdPages(ctx context.Context, cli *clientv3.Client) error {
	value := strings.Repeat("x", 64<<10)
	for i := range 3000 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/offsets/%d", i%64), value); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	resp, err := cli.Delete(ctx, "/offsets/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}
