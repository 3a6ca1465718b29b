package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-dev/strata/broker/auth"
)

// aclSettings turn the authorizer on for a SASL_PLAINTEXT broker whose
// super users are admin and broker (the inter-broker user).
var aclSettings = map[string]string{
	"listeners":             "SASL_PLAINTEXT://127.0.0.1:0",
	"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"super.users":           "User:admin;User:broker",
	// The inter-broker listener is SASL: the broker's own user.
	"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
	"inter.broker.sasl.username":           "broker",
	"inter.broker.sasl.password":           "broker-secret",
}

func userOpts(addr, user string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha512Mechanism()),
		kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}, extra...)
}

func newUserClient(t *testing.T, addr, user string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(userOpts(addr, user, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// startACLBroker starts a standalone broker with ACLs on and SCRAM users
// admin, alice and bob (password <user>-secret) seeded into its
// credential file.
func startACLBroker(t *testing.T, extra map[string]string) *Server {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Broker.DataDir = filepath.Join(dir, "data")
	kv := map[string]string{}
	for k, v := range aclSettings {
		kv[k] = v
	}
	for k, v := range extra {
		kv[k] = v
	}
	if _, err := ApplySettings(&cfg, kv); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cfg.Broker.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	creds, err := auth.OpenFileStore(filepath.Join(cfg.Broker.DataDir, "__scram_credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"admin", "alice", "bob"} {
		seedScramUser(t, creds, u, u+"-secret")
	}
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

func allowACL(adm *kadm.Client, ctx context.Context, b *kadm.ACLBuilder) error {
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("create %v %s %s: %w", r.Type, r.Name, r.Operation, r.Err)
		}
	}
	return nil
}

// consumeOne reads one record of topic (in group, when set) or returns
// the first fetch error.
func consumeOne(ctx context.Context, addr, user, topic, group string) error {
	opts := userOpts(addr, user, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return firstRecord(ctx, cl)
}

func TestACLsAllowAndDeny(t *testing.T) {
	s := startACLBroker(t, nil)
	addr := s.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kadm.NewClient(newUserClient(t, addr, "admin"))
	for _, topic := range []string{"orders", "orders-eu", "orders-secret", "payments"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		if err := newUserClient(t, addr, "admin").ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("admin (super user) produce to %s: %v", topic, err)
		}
	}

	// No ACL yet: alice may do nothing (allow.everyone.if.no.acl.found
	// is false by default).
	alice := newUserClient(t, addr, "alice", kgo.DisableIdempotentWrite())
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Grants, as kafka-acls.sh / kadm make them.
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Groups("g-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead),
		kadm.NewACLs().Deny("User:alice").Topics("orders-secret").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:bob").AllowHosts("10.9.9.9").Topics("*").Operations(kadm.OpAll),
	} {
		if err := allowACL(admin, ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny).AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatalf("describe: %v", d.Err)
		}
		n += len(d.Described)
	}
	if n != 5 {
		t.Fatalf("DescribeACLs found %d bindings, want 5: %+v", n, described)
	}

	t.Run("bad binding", func(t *testing.T) {
		res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("client.example.com").Topics("orders").Operations(kadm.OpRead))
		if err == nil {
			err = res[0].Err
		}
		if !errors.Is(err, kerr.InvalidRequest) {
			t.Fatalf("a host name as ACL host: %v, want INVALID_REQUEST", err)
		}
	})
	t.Run("produce allowed, idempotent too", func(t *testing.T) {
		idem := newUserClient(t, addr, "alice")
		if err := idem.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("a")}).FirstErr(); err != nil {
			t.Fatalf("alice produce with WRITE: %v", err)
		}
	})
	t.Run("consume denied", func(t *testing.T) {
		if err := consumeOne(ctx, addr, "alice", "orders", ""); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice consume without READ: %v", err)
		}
	})
	t.Run("prefixed READ with a prefixed group", func(t *testing.T) {
		if err := consumeOne(ctx, addr, "alice", "orders-eu", "g-1"); err != nil {
			t.Fatalf("alice consume orders-eu in g-1: %v", err)
		}
		if err := consumeOne(ctx, addr, "alice", "orders-eu", "other-group"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("alice in a group without READ: %v", err)
		}
	})
	t.Run("groups are listed and described by right", func(t *testing.T) {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "payments", Partition: 0, At: 1, LeaderEpoch: -1})
		if _, err := admin.CommitOffsets(ctx, "admins-group", os); err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(alice)
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := listed["g-1"]; !ok || len(listed) != 1 {
			t.Fatalf("alice lists groups %v, want g-1 only", listed.Groups())
		}
		described, err := adm.DescribeGroups(ctx, "g-1")
		if err != nil || described["g-1"].Err != nil {
			t.Fatalf("alice describes g-1: %v %v", err, described["g-1"].Err)
		}
		// Refused already when the client looks for the coordinator.
		if _, err := adm.DescribeGroups(ctx, "admins-group"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("alice describes admins-group: %v", err)
		}
		// The broker's own answer, asked directly.
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups, dg.IncludeAuthorizedOperations = []string{"g-1", "admins-group"}, true
		dr, err := dg.RequestWith(ctx, alice.Broker(0))
		if err != nil {
			t.Fatal(err)
		}
		wantOps := int32(1<<int(kmsg.ACLOperationRead) | 1<<int(kmsg.ACLOperationDescribe))
		if len(dr.Groups) != 2 || dr.Groups[0].ErrorCode != 0 || dr.Groups[0].AuthorizedOperations != wantOps ||
			dr.Groups[1].Group != "admins-group" || dr.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("DescribeGroups g-1, admins-group as alice: %+v", dr.Groups)
		}
		fetched, err := adm.FetchOffsets(ctx, "admins-group")
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("alice fetches admins-group's offsets: %v %v", err, fetched)
		}
	})
	t.Run("consumer protocol by right", func(t *testing.T) {
		join := func(group string) *kmsg.ConsumerGroupHeartbeatResponse {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, group, "alice-member-"+group, 0
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{"orders-eu"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp, err := req.RequestWith(ctx, alice.Broker(0))
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		if resp := join("g-848"); resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
			t.Fatalf("alice joins g-848 (READ on g-): %+v", resp)
		}
		if resp := join("other-group"); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("alice joins other-group: %+v", resp)
		}
		cd := kmsg.NewPtrConsumerGroupDescribeRequest()
		cd.Groups = []string{"g-848", "admins-group"}
		dr, err := cd.RequestWith(ctx, alice.Broker(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(dr.Groups) != 2 || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 ||
			dr.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("ConsumerGroupDescribe g-848, admins-group as alice: %+v", dr.Groups)
		}
	})
	t.Run("deny wins", func(t *testing.T) {
		if err := consumeOne(ctx, addr, "alice", "orders-secret", ""); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice consume a denied topic under an allowed prefix: %v", err)
		}
	})
	t.Run("host", func(t *testing.T) {
		bob := newUserClient(t, addr, "bob", kgo.DisableIdempotentWrite())
		if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("b")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob from 127.0.0.1 with ALL from 10.9.9.9 only: %v", err)
		}
	})
	t.Run("metadata hides topics", func(t *testing.T) {
		md, err := kadm.NewClient(alice).Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, td := range md.Topics.Sorted() {
			names = append(names, td.Topic)
		}
		// orders-secret too: READ on the prefix implies DESCRIBE, and a DENY
		// of READ does not deny DESCRIBE (Kafka's rule).
		if got := strings.Join(names, ","); got != "orders,orders-eu,orders-secret" {
			t.Fatalf("alice sees topics %s, want orders,orders-eu,orders-secret", got)
		}
	})
	t.Run("authorized operations", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.IncludeTopicAuthorizedOperations = true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, mt)
		md, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		want := int32(1<<int(kmsg.ACLOperationWrite) | 1<<int(kmsg.ACLOperationDescribe))
		if got := md.Topics[0].AuthorizedOperations; md.Topics[0].ErrorCode != 0 || got != want {
			t.Fatalf("alice's operations on orders %b (error %d), want %b", got, md.Topics[0].ErrorCode, want)
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.IncludeClusterAuthorizedOperations = true
		dr, err := dc.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if dr.ClusterAuthorizedOperations != 0 {
			t.Fatalf("alice's operations on the cluster %b, want none", dr.ClusterAuthorizedOperations)
		}
	})
	t.Run("admin APIs need the cluster", func(t *testing.T) {
		adm := kadm.NewClient(alice)
		res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("payments").Operations(kadm.OpRead))
		if err == nil {
			err = res[0].Err
		}
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("alice CreateACLs: %v", err)
		}
		sc, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "mine"}})
		if err == nil {
			err = sc["alice"].Err
		}
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("alice AlterUserSCRAMs: %v", err)
		}
		dt, err := adm.DeleteTopics(ctx, "orders")
		if err == nil {
			err = dt["orders"].Err
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice DeleteTopics: %v", err)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "alices"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice CreateTopics: %v", err)
		}
		ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, "orders")
		if err == nil {
			err = ac[0].Err
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice AlterConfigs retention.ms=1: %v", err)
		}
	})

	// Deleting the grant takes effect at once.
	del, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).AllowHosts())
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, del)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce after the grant was deleted: %v", err)
	}
	m := s.Metrics()
	if v := testutil.ToFloat64(m.DeniedCounter().WithLabelValues("Produce", "topic")); v < 1 {
		t.Fatalf("strata_authorization_denied_total{api=Produce,resource_type=topic} = %v", v)
	}
}

// TestACLAPIsWithoutAuthorizer: without authorizer.class.name the ACL
// APIs answer SECURITY_DISABLED, as Kafka's, and everyone may do all.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	s := startACLBroker(t, map[string]string{"authorizer.class.name": ""})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(newUserClient(t, s.Addr(), "alice"))
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpRead))
	if err == nil {
		err = res[0].Err
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs without an authorizer: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatalf("CreateTopics without an authorizer: %v", err)
	}
}

// TestACLsInCluster runs three brokers replicating over SASL_PLAINTEXT as
// the super user "broker":
//   - a client that poses as a replica (ReplicaID and even the right
//     broker epoch, read from etcd) is refused without CLUSTER_ACTION,
//     while the real followers keep replicating (acks=all completes);
//   - an ACL created through one broker is enforced by all three without
//     a restart, and its deletion too.
func TestACLsInCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	servers, store, stop := startSCRAMCluster(ctx, t, t.TempDir(), "acl", 3, []string{"admin", "alice", "broker"}, aclSettings)
	defer stop()
	admin := newUserClient(t, servers[0].Addr(), "admin")
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 3, nil, "replicated"); err != nil {
		t.Fatal(err)
	}
	produceAll := func(v string) error {
		return admin.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte(v)}).FirstErr()
	}
	// Retried: CreateTopics answers before every broker applied the topic.
	waitUntil(t, ctx, "acks=all produce through replication", func() error {
		return newUserClient(t, servers[0].Addr(), "admin", kgo.RequiredAcks(kgo.AllISRAcks())).
			ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte("first")}).FirstErr()
	})

	t.Run("spoofed replica fetch", func(t *testing.T) {
		td, err := kadm.NewClient(admin).ListTopics(ctx, "replicated")
		if err != nil {
			t.Fatal(err)
		}
		p := td["replicated"].Partitions[0]
		leader := p.Leader
		var follower int32 = -1
		for _, r := range p.Replicas {
			if r != leader {
				follower = r
			}
		}
		st, err := store.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		epoch := st.Brokers[follower].Epoch
		alice := newUserClient(t, servers[0].Addr(), "alice")
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = follower
		req.ReplicaState.ID, req.ReplicaState.Epoch = follower, epoch
		req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "replicated", td["replicated"].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		// From offset 0: a replica fetch is served up to the log end,
		// past the high watermark, and would report this position as
		// the follower's.
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := alice.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("response %+v", resp)
		}
		if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(sp.RecordBatches) != 0 {
			t.Fatalf("spoofed replica fetch as broker %d (epoch %d) answered %v with %d record bytes, want TOPIC_AUTHORIZATION_FAILED and none",
				follower, epoch, kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
		}
		// The real followers still replicate: acks=all completes.
		acksAll := newUserClient(t, servers[0].Addr(), "admin", kgo.RequiredAcks(kgo.AllISRAcks()))
		if err := acksAll.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("acks=all after the spoof: %v", err)
		}
	})

	t.Run("ACL changes reach every broker", func(t *testing.T) {
		if err := produceAll("x"); err != nil {
			t.Fatal(err)
		}
		alice := newUserClient(t, servers[0].Addr(), "alice")
		listOffsets := func(id int32) int16 {
			req := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("replicated")
			req.Topics = append(req.Topics, mt)
			kresp, err := alice.Broker(int(id)).Request(ctx, req)
			if err != nil {
				return -1
			}
			return kresp.(*kmsg.MetadataResponse).Topics[0].ErrorCode
		}
		for id := range int32(3) {
			if code := listOffsets(id); code != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("broker %d before the grant: %v", id, kerr.ErrorForCode(code))
			}
		}
		if err := allowACL(kadm.NewClient(newUserClient(t, servers[1].Addr(), "admin")), ctx,
			kadm.NewACLs().Allow("User:alice").Topics("replicated").Operations(kadm.OpDescribe)); err != nil {
			t.Fatal(err)
		}
		for id := range int32(3) {
			waitUntil(t, ctx, fmt.Sprintf("broker %d applies the grant", id), func() error {
				if code := listOffsets(id); code != 0 {
					return kerr.ErrorForCode(code)
				}
				return nil
			})
		}
		if _, err := kadm.NewClient(newUserClient(t, servers[2].Addr(), "admin")).DeleteACLs(ctx,
			kadm.NewACLs().Allow("User:alice").Topics("replicated").Operations(kadm.OpDescribe).AllowHosts()); err != nil {
			t.Fatal(err)
		}
		for id := range int32(3) {
			waitUntil(t, ctx, fmt.Sprintf("broker %d applies the deletion", id), func() error {
				if code := listOffsets(id); code != kerr.TopicAuthorizationFailed.Code {
					return fmt.Errorf("answer %v", kerr.ErrorForCode(code))
				}
				return nil
			})
		}
	})
}

// waitUntil polls f until it returns nil, failing the test at ctx's end.
func waitUntil(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
