package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
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

func TestNeedsNoSpaceRecovery(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	recent := metav1.NewTime(now.Add(-time.Minute))
	old := metav1.NewTime(now.Add(-time.Hour))
	healthy := func(last *metav1.Time) strata.MetadataMemberHealth {
		return strata.MetadataMemberHealth{Healthy: true, LastDefragTime: last}
	}
	for _, tc := range []struct {
		name string
		h    strata.MetadataHealth
		want bool
	}{
		{"no alarm", strata.MetadataHealth{Members: []strata.MetadataMemberHealth{healthy(nil)}, HealthyMembers: 1}, false},
		{"NOSPACE, all healthy", strata.MetadataHealth{Alarms: []string{"NOSPACE on member 1"}, Members: []strata.MetadataMemberHealth{healthy(nil), healthy(&old)}, HealthyMembers: 2}, true},
		{"CORRUPT only", strata.MetadataHealth{Alarms: []string{"CORRUPT on member 1"}, Members: []strata.MetadataMemberHealth{healthy(nil)}, HealthyMembers: 1}, false},
		{"NOSPACE, a member down", strata.MetadataHealth{Alarms: []string{"NOSPACE on member 1"}, Members: []strata.MetadataMemberHealth{healthy(nil), {}}, HealthyMembers: 1}, false},
		{"NOSPACE, recovered a minute ago", strata.MetadataHealth{Alarms: []string{"NOSPACE on member 1"}, Members: []strata.MetadataMemberHealth{healthy(&recent)}, HealthyMembers: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsNoSpaceRecovery(&tc.h, now); got != tc.want {
				t.Fatalf("NeedsNoSpaceRecovery = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEtcdRecoverNoSpace fills a real (embedded) etcd with a small quota
// until it raises NOSPACE and refuses writes. When old revisions filled it,
// the recovery compacts, defragments, disarms, and writes work again; when
// live data fills it, the alarm stays and the sizes say why.
func TestEtcdRecoverNoSpace(t *testing.T) {
	const quota = 8 << 20
	value := strings.Repeat("v", 256<<10)
	for _, tc := range []struct {
		name     string
		key      func(i int) string // the i-th write's key
		disarmed bool
	}{
		{"history", func(i int) string { return "/strata/k" }, true},
		{"live data", func(i int) string { return fmt.Sprintf("/strata/k%d", i) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			em, err := meta.StartEmbedded(ctx, t.TempDir(), nil, func(c *embed.Config) { c.QuotaBackendBytes = quota })
			if err != nil {
				t.Fatalf("start etcd: %v", err)
			}
			t.Cleanup(em.Close)
			cli, err := clientv3.New(clientv3.Config{Endpoints: em.Endpoints, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatalf("etcd client: %v", err)
			}
			defer cli.Close()
			written := 0 // puts etcd accepted
			for i := 0; ; i++ {
				if i > 1000 {
					t.Fatal("no NOSPACE after 1000 writes of 256 KiB")
				}
				if _, err := cli.Put(ctx, tc.key(i), value); err != nil {
					if !errors.Is(err, rpctypes.ErrNoSpace) {
						t.Fatalf("put %d: %v", i, err)
					}
					break
				}
				written++
				if !tc.disarmed {
					// Free pages left by earlier transactions (more of them on
					// a loaded machine, where reads pin pages longer) would
					// raise NOSPACE before the live data nears the quota;
					// defragmenting after each put makes the file the live
					// data, so NOSPACE comes only when that fills the quota.
					if _, err := cli.Defragment(ctx, em.Endpoints[0]); err != nil {
						t.Fatalf("defragment after put %d: %v", i, err)
					}
				}
			}
			p := EtcdProber{}
			h := p.Probe(ctx, em.Endpoints)
			if !NeedsNoSpaceRecovery(&h, time.Now()) {
				t.Fatalf("probe after NOSPACE: %+v", h)
			}
			// An etcd in NOSPACE answers: it is an alarm, not an outage.
			if reason, msg := metadataCondition(&h); reason != ReasonEtcdAlarm || !strings.Contains(msg, "NOSPACE") {
				t.Fatalf("condition %s: %s; want %s naming NOSPACE", reason, msg, ReasonEtcdAlarm)
			}
			res, err := p.RecoverNoSpace(ctx, em.Endpoints)
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			t.Logf("recovery after %d accepted puts of %d bytes: %+v", written, len(value), res)
			if live := written * len(value); !tc.disarmed && float64(live) <= noSpaceDisarmRatio*quota {
				// etcd raised NOSPACE before this much live data was in: the
				// case cannot show what it is about (not a recovery bug).
				t.Fatalf("etcd raised NOSPACE with only %d bytes of live data (quota %d)", live, quota)
			}
			if res.Disarmed != tc.disarmed || res.QuotaBytes != quota {
				t.Fatalf("recovery %+v after %d accepted puts, want disarmed %v and quota %d", res, written, tc.disarmed, quota)
			}
			_, err = cli.Put(ctx, "/strata/after", "x")
			h = p.Probe(ctx, em.Endpoints)
			if tc.disarmed {
				if err != nil || len(h.Alarms) > 0 {
					t.Fatalf("after recovery: put %v, alarms %v", err, h.Alarms)
				}
				return
			}
			if !errors.Is(err, rpctypes.ErrNoSpace) || len(h.Alarms) == 0 {
				t.Fatalf("live data over the quota: put %v, alarms %v; want NOSPACE kept", err, h.Alarms)
			}
			if float64(res.DBSizeBytes) <= noSpaceDisarmRatio*quota {
				t.Fatalf("not disarmed though the database (%d bytes) fits", res.DBSizeBytes)
			}
		})
	}
}
