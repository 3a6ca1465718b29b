package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitionsACLs checks DescribeTopicPartitions follows
// Metadata's rules: a listing of every topic shows only the topics the
// principal may DESCRIBE, a named topic it may not describe is refused
// without its topic ID (existing or not), and each answered topic carries
// the principal's authorized operations.
func TestDescribeTopicPartitionsACLs(t *testing.T) {
	s := startACLBroker(t, nil)
	addr := s.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kadm.NewClient(newUserClient(t, addr, "admin"))
	for _, topic := range []string{"visible", "hidden"} {
		if _, err := admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := allowACL(admin, ctx, kadm.NewACLs().Allow("User:alice").Topics("visible").Operations(kadm.OpDescribe)); err != nil {
		t.Fatal(err)
	}
	alice := newUserClient(t, addr, "alice")
	describe := func(topics ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, name := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
		}
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	all := describe()
	if len(all.Topics) != 1 || *all.Topics[0].Topic != "visible" || len(all.Topics[0].Partitions) != 2 {
		t.Fatalf("alice lists %+v, want visible alone", all.Topics)
	}
	if got, want := all.Topics[0].AuthorizedOperations, int32(1<<int(kmsg.ACLOperationDescribe)); got != want {
		t.Fatalf("alice's operations on visible %b, want %b", got, want)
	}

	named := describe("hidden", "visible", "nowhere")
	codes := map[string]kmsg.DescribeTopicPartitionsResponseTopic{}
	for _, rt := range named.Topics {
		codes[*rt.Topic] = rt
	}
	for name, code := range map[string]int16{"visible": 0, "hidden": kerr.TopicAuthorizationFailed.Code, "nowhere": kerr.TopicAuthorizationFailed.Code} {
		rt, ok := codes[name]
		if !ok || rt.ErrorCode != code {
			t.Fatalf("%s: %+v, want error %d", name, rt, code)
		}
		if code != 0 && (rt.TopicID != [16]byte{} || len(rt.Partitions) != 0) {
			t.Fatalf("refused %s discloses %+v", name, rt)
		}
	}
}
