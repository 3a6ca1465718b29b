package protocol_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestInternalTopicNamesReserved: Strata keeps group offsets and
// transaction state in etcd, and WriteTxnMarkers entries naming
// __consumer_offsets go to the group coordinator, so a user topic named
// like one of Kafka's internal topics would never complete a transaction
// (its commit markers never reach the partition). Creating one is refused
// (CreateTopics, validate-only too, and Metadata's auto-creation), and a
// write to one answers INVALID_TOPIC_EXCEPTION, Kafka's answer to a
// client writing to an internal topic, rather than a retriable unknown
// topic. Metadata naming either creates the brokers' read-only
// projection of it, as Kafka creates its internal topics on request.
func TestInternalTopicNamesReserved(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "true"))
	adm := newAdmin(t, b.Addr())
	cl := newClient(t, b.Addr())
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		t.Run(name, func(t *testing.T) {
			for _, validateOnly := range []bool{false, true} {
				create := adm.CreateTopics
				if validateOnly {
					create = adm.ValidateCreateTopics
				}
				resp, err := create(testCtx(t), 1, 1, nil, name)
				if err != nil {
					t.Fatal(err)
				}
				if err := resp[name].Err; !errors.Is(err, kerr.InvalidTopicException) {
					t.Fatalf("CreateTopics %s (validate only %v): %v, want INVALID_TOPIC_EXCEPTION", name, validateOnly, err)
				}
			}

			md := kmsg.NewPtrMetadataRequest()
			md.AllowAutoTopicCreation = true
			md.Topics = []kmsg.MetadataRequestTopic{{Topic: sp(name)}}
			mresp, err := md.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			code := mresp.Topics[0].ErrorCode
			// Created on request, as Kafka creates its internal topics:
			// the brokers' read-only projection of the group or
			// transaction store (offsets_topic_test.go,
			// txn_state_topic_test.go).
			if code != 0 && code != kerr.LeaderNotAvailable.Code {
				t.Fatalf("Metadata naming %s: error %d, want it created", name, code)
			}

			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 30000
			req.Topics = []kmsg.ProduceRequestTopic{{Topic: name, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(t, "x")}}}}
			presp, err := req.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
				t.Fatalf("Produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", name, code)
			}
		})
	}
	topics, err := adm.ListTopicsWithInternal(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 2 || !topics["__consumer_offsets"].IsInternal || !topics["__transaction_state"].IsInternal {
		t.Fatalf("topics after the refusals: %v, want only the internal __consumer_offsets and __transaction_state", names)
	}
}
