package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-dev/strata/broker/objstore"
)

// nemesis carries out a schedule against the cluster.
type nemesis struct {
	c       *cluster
	res     *Result
	log     io.Writer
	verbose bool
}

// run applies each fault at its time and heals it after its duration.
// Faults that cannot be applied are counted in FaultErrors; an error is a
// harness failure (a broker that does not start again).
func (n *nemesis) run(ctx context.Context, start time.Time, schedule []Fault) error {
	for _, f := range schedule {
		if d := time.Until(start.Add(f.At)); d > 0 {
			wait(ctx, d) // the schedule's time, not synchronisation
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		heal, what, err := n.apply(ctx, f)
		stamp := fmt.Sprintf("t=%5.1fs %s", time.Since(start).Seconds(), f.Kind)
		if err != nil {
			n.res.FaultErrors[f.Kind]++
			n.res.Applied = append(n.res.Applied, stamp+" not applied: "+err.Error())
			if n.verbose {
				fmt.Fprintf(n.log, "  %s not applied: %v\n", stamp, err)
			}
			continue
		}
		n.res.Faults[f.Kind]++
		n.res.Applied = append(n.res.Applied, stamp+" "+what)
		if n.verbose {
			fmt.Fprintf(n.log, "  %s %s\n", stamp, what)
		}
		if heal != nil {
			if f.Duration > 0 {
				wait(ctx, f.Duration) // how long the fault lasts
			}
			if err := heal(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("healing %s: %w", f, err)
			}
		}
	}
	return nil
}

// healAll ends every fault: proxies pass, paused brokers continue, stopped
// brokers start.
func (n *nemesis) healAll(ctx context.Context) {
	for _, p := range n.c.etcdPx {
		p.SetMode(ModePass)
	}
	for _, p := range n.c.s3Px {
		p.Set(bucketFault{})
	}
	n.healDiskFaults()
	for _, b := range n.c.brokers {
		b.mu.Lock()
		paused := b.paused
		b.mu.Unlock()
		if paused {
			_ = b.resume()
		}
		if !b.running() {
			if err := b.start(ctx); err != nil {
				n.res.Problems = append(n.res.Problems, fmt.Sprintf("restart broker %d while healing: %v", b.id, err))
			}
		}
	}
}

// apply injects f; heal (nil for instantaneous faults) ends it.
func (n *nemesis) apply(ctx context.Context, f Fault) (heal func(context.Context) error, what string, err error) {
	switch f.Kind {
	case KindPowerLoss, KindDiskFull:
		return n.applyDiskFault(ctx, f)
	case KindKill, KindPause, KindRestart:
		b, err := n.resolveBroker(ctx, f.Target)
		if err != nil {
			return nil, "", err
		}
		what = fmt.Sprintf("broker %d (%s)", b.id, f.Target)
		switch f.Kind {
		case KindKill:
			b.kill()
			return func(ctx context.Context) error { return b.start(ctx) }, what, nil
		case KindPause:
			if err := b.pause(); err != nil {
				return nil, "", err
			}
			return func(context.Context) error { return b.resume() }, what, nil
		default:
			if !b.stop(30 * time.Second) {
				n.res.Problems = append(n.res.Problems, fmt.Sprintf("restart: broker %d did not stop cleanly on SIGTERM", b.id))
			}
			return nil, what, b.start(ctx)
		}
	case KindEtcdCut:
		id, err := targetBroker(f.Target)
		if err != nil {
			return nil, "", err
		}
		px := n.c.etcdPx[id]
		if px == nil {
			return nil, "", fmt.Errorf("no broker %d", id)
		}
		px.SetMode(f.Mode)
		return func(context.Context) error { px.SetMode(ModePass); return nil }, fmt.Sprintf("broker %d etcd %s", id, f.Mode), nil
	case KindBucketOutage, KindBucketSlow, KindS3Errors:
		zone := strings.TrimPrefix(f.Target, "zone:")
		px := n.c.s3Px[zone]
		if px == nil {
			return nil, "", fmt.Errorf("no bucket proxy for zone %q", zone)
		}
		switch f.Kind {
		case KindBucketOutage:
			px.Set(bucketFault{outage: true})
		case KindBucketSlow:
			px.Set(bucketFault{latency: f.Latency})
		default:
			px.Set(bucketFault{fraction: f.Fraction})
		}
		return func(context.Context) error { px.Set(bucketFault{}); return nil }, "bucket of zone " + zone, nil
	case KindCorrupt, KindDelete:
		key, err := n.tamper(ctx, strings.TrimPrefix(f.Target, "zone:"), f.Kind == KindDelete)
		return nil, key, err
	case KindReassign:
		tp, err := targetPartition(f.Target)
		if err != nil {
			return nil, "", err
		}
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(tp.Topic, tp.Partition, f.Replicas)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := n.c.adm.AlterPartitionAssignments(rctx, req)
		if err != nil {
			return nil, "", err
		}
		if err := resp.Error(); err != nil {
			return nil, "", err
		}
		return nil, fmt.Sprintf("%s to %v", tp, f.Replicas), nil
	case KindElect:
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		set := kadm.TopicsSet{}
		for _, tp := range n.c.tps {
			set.Add(tp.Topic, tp.Partition)
		}
		resp, err := n.c.adm.ElectLeaders(rctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return nil, "", err
		}
		moved := 0
		for _, ps := range resp {
			for _, r := range ps {
				if r.Err == nil {
					moved++
				}
			}
		}
		return nil, fmt.Sprintf("%d partitions moved to their preferred leader", moved), nil
	}
	return nil, "", fmt.Errorf("unknown fault kind %q", f.Kind)
}

// resolveBroker resolves "broker:<id>" or "leader:<topic>/<partition>"
// (the partition's leader now; if it has none, the partition's first
// replica). The broker must be running, and every other broker too: a
// kill, pause or restart never takes down a second broker.
func (n *nemesis) resolveBroker(ctx context.Context, target string) (*broker, error) {
	for _, b := range n.c.brokers {
		if inc, up := b.Incarnation(); !up {
			return nil, fmt.Errorf("broker %d is down (incarnation %d): not taking down a second one", b.id, inc)
		}
	}
	var id int32
	if strings.HasPrefix(target, "leader:") {
		tp, err := targetPartition(strings.Replace(target, "leader:", "partition:", 1))
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		td, err := n.c.adm.ListTopics(rctx, tp.Topic)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", target, err)
		}
		pd := td[tp.Topic].Partitions[tp.Partition]
		id = pd.Leader
		if id < 0 && len(pd.Replicas) > 0 {
			id = pd.Replicas[0]
		}
	} else {
		var err error
		if id, err = targetBroker(target); err != nil {
			return nil, err
		}
	}
	b := n.c.brokerByID(id)
	if b == nil {
		return nil, fmt.Errorf("%s: no broker %d", target, id)
	}
	return b, nil
}

func targetBroker(target string) (int32, error) {
	s, ok := strings.CutPrefix(target, "broker:")
	id, err := strconv.ParseInt(s, 10, 32)
	if !ok || err != nil {
		return 0, fmt.Errorf("target %q: want broker:<id>", target)
	}
	return int32(id), nil
}

func targetPartition(target string) (TP, error) {
	s, ok := strings.CutPrefix(target, "partition:")
	i := strings.LastIndexByte(s, '/')
	if !ok || i < 0 {
		return TP{}, fmt.Errorf("target %q: want partition:<topic>/<partition>", target)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return TP{}, fmt.Errorf("target %q: %w", target, err)
	}
	return TP{s[:i], int32(p)}, nil
}

// errNoObject: the bucket held no WAL object to corrupt or delete.
var errNoObject = errors.New("no WAL object in the bucket")

// tamper corrupts (flips one byte in the middle of) or deletes the newest
// WAL object of zone's bucket, directly on the S3 server (not through the
// zone's fault proxy), and returns its key.
func (n *nemesis) tamper(ctx context.Context, zone string, del bool) (string, error) {
	s3 := n.c.o.S3
	st, err := objstore.NewS3(ctx, objstore.Config{Bucket: BucketPrefix + zone, Region: s3.Region, Endpoint: s3.Endpoint, ForcePathStyle: true,
		MaxAttempts: 1, Credentials: &objstore.StaticCredentials{AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey}})
	if err != nil {
		return "", err
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	objs, err := st.List(rctx, "wal/")
	if err != nil {
		return "", err
	}
	if len(objs) == 0 {
		return "", errNoObject
	}
	// The newest object: the one a follower most likely still needs.
	newest := slices.MaxFunc(objs, func(a, b objstore.ObjectInfo) int {
		if c := a.LastModified.Compare(b.LastModified); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	key := newest.Key
	where := st.Bucket() + "/" + key
	if del {
		return "deleted " + where, st.Delete(rctx, key)
	}
	info, err := st.Head(rctx, key)
	if err != nil {
		return "", err
	}
	data, err := st.Get(rctx, key, 0, info.Size)
	if err != nil {
		return "", err
	}
	if len(data) == 0 {
		return "", errNoObject
	}
	data[len(data)/2] ^= 0xff
	return "corrupted " + where, st.Put(rctx, key, data)
}
