package protocol_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestPartitionLimits: CreateTopics (also ValidateOnly) and
// CreatePartitions over max.partitions.per.topic get INVALID_PARTITIONS,
// over the cluster-wide max.partitions POLICY_VIOLATION, with a message
// naming the limit, on a standalone broker and in cluster mode, before
// anything is planned (NumPartitions=2147483647 made the cluster placement
// allocate ~48 GiB).
func TestPartitionLimits(t *testing.T) {
	limits := []brokertest.Option{
		brokertest.WithLogger(discardLogger()),
		brokertest.WithSetting("max.partitions.per.topic", "4"),
		brokertest.WithSetting("max.partitions", "6"),
	}
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var addr string
			if mode == "cluster" {
				addr = brokertest.StartCluster(t, []string{"a"}, limits...).Addrs()[0]
			} else {
				addr = brokertest.Start(t, limits...).Addr()
			}
			cl := newClient(t, addr)
			create := func(topic string, partitions int32, validateOnly bool) (int16, string) {
				t.Helper()
				req := kmsg.NewPtrCreateTopicsRequest()
				req.ValidateOnly, req.TimeoutMillis = validateOnly, 30_000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(testCtx(t), cl)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Topics[0]
				msg := ""
				if st.ErrorMessage != nil {
					msg = *st.ErrorMessage
				}
				return st.ErrorCode, msg
			}
			grow := func(topic string, count int32, validateOnly bool) (int16, string) {
				t.Helper()
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.ValidateOnly, req.TimeoutMillis = validateOnly, 30_000
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = topic, count
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(testCtx(t), cl)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Topics[0]
				msg := ""
				if st.ErrorMessage != nil {
					msg = *st.ErrorMessage
				}
				return st.ErrorCode, msg
			}
			check := func(what string, code int16, msg string, want *kerr.Error, key string) {
				t.Helper()
				if code != want.Code || !strings.Contains(msg, key) {
					t.Errorf("%s: got %v %q, want %v naming %s", what, kerr.ErrorForCode(code), msg, want, key)
				}
			}
			for _, validateOnly := range []bool{true, false} {
				code, msg := create("huge", 2147483647, validateOnly)
				check("CreateTopics 2147483647 partitions", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
				code, msg = create("five", 5, validateOnly)
				check("CreateTopics 5 partitions", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
			}
			if code, msg := create("t1", 4, false); code != 0 {
				t.Fatalf("CreateTopics t1 with 4 partitions: %v %s", kerr.ErrorForCode(code), msg)
			}
			for _, validateOnly := range []bool{true, false} {
				code, msg := create("t2", 3, validateOnly)
				check("CreateTopics 3 more partitions (7 in all)", code, msg, kerr.PolicyViolation, "max.partitions=6")
				code, msg = grow("t1", 2147483647, validateOnly)
				check("CreatePartitions to 2147483647", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
			}
			if code, msg := create("t2", 2, false); code != 0 {
				t.Fatalf("CreateTopics t2 with 2 partitions: %v %s", kerr.ErrorForCode(code), msg)
			}
			code, msg := grow("t2", 3, true)
			check("CreatePartitions t2 to 3 (7 in all)", code, msg, kerr.PolicyViolation, "max.partitions=6")
		})
	}
}
