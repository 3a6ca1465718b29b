package server

import (
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApplySettingsConnectionLimits: the connection limit keys are read
// and checked like the other broker keys; a bad value stops the broker.
func TestApplySettingsConnectionLimits(t *testing.T) {
	cfg := DefaultConfig()
	unknown, err := ApplySettings(&cfg, map[string]string{
		"max.connections":                         "500",
		"listener.name.EXTERNAL.max.connections":  "300",
		"listener.name.sasl_ssl.max.connections":  "200",
		"max.connections.per.ip":                  "50",
		"max.connections.per.ip.overrides":        "10.0.0.7:400, [::1]:0,127.0.0.3:7",
		"max.connection.creation.rate":            "100",
		"max.connection.creation.rate.per.ip":     "2.5",
		"connections.authentication.timeout.ms":   "3000",
		"listener.name.external.ssl.client.auth":  "required",
		"listener.name.external.unknown.property": "x",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(unknown, []string{"listener.name.external.unknown.property"}) {
		t.Errorf("unknown = %v", unknown)
	}
	want := ConnectionLimits{
		MaxConnections: 500,
		PerListener:    map[string]int{"external": 300, "sasl_ssl": 200},
		PerIP:          50,
		PerIPOverrides: map[string]int{"10.0.0.7": 400, "::1": 0, "127.0.0.3": 7},
		CreationRate:   100, CreationRatePerIP: 2.5,
		AuthenticationTimeout: 3 * time.Second,
	}
	if !reflect.DeepEqual(cfg.Connections, want) {
		t.Errorf("connection limits %+v, want %+v", cfg.Connections, want)
	}
	if cfg.Security.TLS["external"].ClientAuth != "required" {
		t.Errorf("listener.name.external.ssl.client.auth lost: %+v", cfg.Security.TLS)
	}
	for _, bad := range []map[string]string{
		{"max.connections": "0"},
		{"max.connections": "many"},
		{"max.connections.per.ip": "-1"},
		{"listener.name.external.max.connections": "0"},
		{"max.connections.per.ip.overrides": "broker-1.example:10"},
		{"max.connections.per.ip.overrides": "10.0.0.1"},
		{"max.connections.per.ip.overrides": "10.0.0.1:-1"},
		{"max.connection.creation.rate": "0"},
		{"max.connection.creation.rate": "NaN"},
		{"max.connection.creation.rate.per.ip": "+Inf"},
		{"connections.authentication.timeout.ms": "10"},
	} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, bad); err == nil {
			t.Errorf("ApplySettings(%v) accepted", bad)
		}
	}
}

// TestConnectionLimitOfUnknownListener: a per-listener limit must name a
// listener the broker has.
func TestConnectionLimitOfUnknownListener(t *testing.T) {
	ls := []resolvedListener{{Name: "PLAINTEXT"}, {Name: "SASL_SSL"}}
	if err := (ConnectionLimits{PerListener: map[string]int{"sasl_ssl": 1, "plaintext": 2}}).checkListeners(ls); err != nil {
		t.Errorf("limits of existing listeners: %v", err)
	}
	if err := (ConnectionLimits{PerListener: map[string]int{"external": 1}}).checkListeners(ls); err == nil {
		t.Error("a limit of listener EXTERNAL, which the broker does not have, was accepted")
	}
}

// TestSingleListenerNotProtected: a broker with one listener uses it for
// replication too, but does not exempt it from the broker-wide
// connection creation rate (Kafka's protectedListener needs other
// listeners beside it): before, every client of such a broker was exempt
// from max.connection.creation.rate.
func TestSingleListenerNotProtected(t *testing.T) {
	s := startMetrics(t, map[string]string{"max.connection.creation.rate": "0.01"})
	served := func() bool {
		c, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
		if errors.Is(err, syscall.ECONNRESET) {
			return false // refused (a reset) before the dial returned
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a hang guard
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("rate")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
		if _, err := c.Write(frame); err != nil {
			return false
		}
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("neither answered nor closed")
		}
		return err == nil
	}
	if !served() {
		t.Fatal("the first connection was refused")
	}
	if served() {
		t.Fatal("a second connection within 100 s was served at max.connection.creation.rate=0.01 on the broker's only listener")
	}
}
