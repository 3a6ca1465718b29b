package protocol_test

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// servedFrom dials addr from the loopback address ip and says whether the
// broker answers an ApiVersions request on the connection (false: it
// closed the connection at accept).
func servedFrom(t *testing.T, ip, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		// The kernel completed the handshake, the broker refused the
		// connection at accept (a reset, SO_LINGER 0) and the reset came
		// before the dial saw the connection established.
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("ipq")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	if _, err := c.Write(frame); err != nil {
		return false
	}
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	switch {
	case err == nil:
		return true
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return false
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("no answer from %s and no close", addr)
	}
	t.Fatalf("read: %v", err)
	return false
}

// TestIPConnectionCreationQuota: KIP-612's ip entity through the admin
// API. AlterClientQuotas sets connection_creation_rate on one address
// (its name stored in canonical form: an IPv4-mapped IPv6 name is the
// IPv4 address) and on the default ip entity; DescribeClientQuotas shows
// both; the broker refuses new connections from the address at 0 while
// another address is served, holds the others to the default, and serves
// the address again once its quota is removed. The key on a user entity
// and a fractional or negative rate are refused.
func TestIPConnectionCreationQuota(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"})
	ctx := testCtx(t)
	addr := c.Addrs()[0]
	adm := newAdmin(t, addr)

	alter := func(entity kadm.ClientQuotaEntity, op kadm.AlterClientQuotaOp) error {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{op}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Err
	}
	blocked, mapped := "127.0.0.9", "::ffff:127.0.0.9"
	user := "alice"
	for _, bad := range []struct {
		entity kadm.ClientQuotaEntity
		value  float64
		want   error
	}{
		{kadm.ClientQuotaEntity{{Type: "user", Name: &user}}, 5, kerr.InvalidRequest},
		{kadm.ClientQuotaEntity{{Type: "ip", Name: &blocked}}, 1.5, kerr.InvalidConfig},
		{kadm.ClientQuotaEntity{{Type: "ip", Name: &blocked}}, -1, kerr.InvalidConfig},
	} {
		if err := alter(bad.entity, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: bad.value}); !errors.Is(err, bad.want) {
			t.Errorf("connection_creation_rate=%v on %v: %v, want %v", bad.value, bad.entity, err, bad.want)
		}
	}

	if !servedFrom(t, blocked, addr) {
		t.Fatal("refused before any quota")
	}
	if err := alter(kadm.ClientQuotaEntity{{Type: "ip", Name: &mapped}}, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 0}); err != nil {
		t.Fatalf("alter %s: %v", mapped, err)
	}
	if err := alter(kadm.ClientQuotaEntity{{Type: "ip"}}, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 1}); err != nil {
		t.Fatalf("alter the default ip entity: %v", err)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, e := range described {
		if e.Entity[0].Type != "ip" {
			continue
		}
		name := "<default>"
		if e.Entity[0].Name != nil {
			name = *e.Entity[0].Name
		}
		got[name] = e.Values[0].Value
	}
	if len(got) != 2 || got[blocked] != 0 || got["<default>"] != 1 {
		t.Fatalf("described ip quotas %v, want %s=0 and <default>=1", got, blocked)
	}

	if servedFrom(t, blocked, addr) {
		t.Error("a new connection from an address with connection_creation_rate 0 was served")
	}
	// The default ip entity: one connection a second with a burst of one,
	// so of connections opened back to back at least one is refused.
	refused := 0
	for range 5 {
		if !servedFrom(t, "127.0.0.11", addr) {
			refused++
		}
	}
	if refused == 0 {
		t.Error("5 connections opened back to back from one address under a default quota of 1/s were all served")
	}

	if err := alter(kadm.ClientQuotaEntity{{Type: "ip", Name: &blocked}}, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Remove: true}); err != nil {
		t.Fatal(err)
	}
	if err := alter(kadm.ClientQuotaEntity{{Type: "ip"}}, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Remove: true}); err != nil {
		t.Fatal(err)
	}
	if !servedFrom(t, blocked, addr) {
		t.Error("still refused after the quota was removed")
	}
}
