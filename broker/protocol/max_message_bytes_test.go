package protocol_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestMaxMessageBytesMustBePositive: max.message.bytes=0 meant "no limit"
// (a 32 KB zstd batch of 1 GiB was accepted, issue 26); 0 and below are
// refused with INVALID_CONFIG by CreateTopics, AlterConfigs and
// IncrementalAlterConfigs, and change nothing.
func TestMaxMessageBytesMustBePositive(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	for _, v := range []string{"0", "-1"} {
		resp, err := adm.CreateTopics(testCtx(t), 1, 1, map[string]*string{"max.message.bytes": sp(v)}, "unbounded")
		if err != nil {
			t.Fatal(err)
		}
		if err := resp["unbounded"].Err; !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("CreateTopics with max.message.bytes=%s: %v, want INVALID_CONFIG", v, err)
		}
	}
	createTopic(t, adm, "bounded", 1, map[string]*string{"max.message.bytes": sp("2000")})
	for _, v := range []string{"0", "-1"} {
		ar, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: sp(v)}}, "bounded")
		if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
			t.Errorf("IncrementalAlterConfigs max.message.bytes=%s: %v %+v, want INVALID_CONFIG", v, err, ar)
		}
		lr, err := adm.AlterTopicConfigsState(testCtx(t), []kadm.AlterConfig{{Name: "max.message.bytes", Value: sp(v)}}, "bounded")
		if err != nil || !errors.Is(lr[0].Err, kerr.InvalidConfig) {
			t.Errorf("AlterConfigs max.message.bytes=%s: %v %+v, want INVALID_CONFIG", v, err, lr)
		}
	}
	rc, err := adm.DescribeTopicConfigs(testCtx(t), "bounded")
	if err != nil {
		t.Fatal(err)
	}
	r, err := rc.On("bounded", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Configs {
		if c.Key == "max.message.bytes" && c.MaybeValue() != "2000" {
			t.Errorf("after the refused alters max.message.bytes=%s, want 2000", c.MaybeValue())
		}
	}
}
