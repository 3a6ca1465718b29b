package protocol_test

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/protocol"
)

// TestZoneLocalTagFromClient: a Produce partition naming forwarded records
// (protocol.TagZoneLocalRecords) on a broker that reads no WAL bucket is
// refused with KAFKA_STORAGE_ERROR and appends nothing: a client cannot
// make a broker append what an object holds.
func TestZoneLocalTagFromClient(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "zl", 1, nil)
	cl := newClient(t, b.Addr())

	var tag []byte
	for _, s := range []string{"wal-a", "wal/x/a/1/zl-1/00000000000000000000"} {
		tag = binary.BigEndian.AppendUint16(tag, uint16(len(s)))
		tag = append(tag, s...)
	}
	tag = append(tag, make([]byte, 16)...)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "zl"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.UnknownTags.Set(protocol.TagZoneLocalRecords, tag)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := kresp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("error code %d, want KAFKA_STORAGE_ERROR", code)
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "zl")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("zl", 0); o.Offset != 0 {
		t.Fatalf("log end %d after a refused forwarded produce", o.Offset)
	}
}

// TestZoneLocalFormsAnnounced: a broker tells other brokers (client ID
// strata-broker-…), in its ApiVersions v3+ answer, that it reads the
// compact form of forwarded records; clients are not told.
func TestZoneLocalFormsAnnounced(t *testing.T) {
	b := brokertest.Start(t)
	for _, tc := range []struct {
		clientID string
		version  int16
		want     bool
	}{
		{"strata-broker-2,strata_az=b", 3, true},
		{"strata-broker-2,strata_az=b", 4, true},
		{"orders-svc,strata_az=b", 3, false},
	} {
		cl := newClient(t, b.Addr(), kgo.ClientID(tc.clientID))
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(tc.version)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-broker", "1"
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		var forms []byte
		resp.UnknownTags.Each(func(tag uint32, v []byte) {
			if tag == protocol.TagZoneLocalForms {
				forms = v
			}
		})
		if got := len(forms) == 1 && forms[0] == protocol.ZoneLocalFormsRead; got != tc.want {
			t.Errorf("%s v%d: forms tag %x, want it %v", tc.clientID, tc.version, forms, tc.want)
		}
	}
}
