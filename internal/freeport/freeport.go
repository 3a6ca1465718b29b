// Package freeport picks loopback TCP ports for processes that a test, or
// the chaos harness, starts and that bind them later.
//
// A port found by listening on port 0 and closing comes from the
// kernel's ephemeral range, the range it also takes the local port of
// every outgoing connection from: on a machine running many tests, some
// other client's connect() took such a port between the pick and the
// broker's bind ("bind: address already in use", make test of 6 December
// 2026). The ports here are below that range, where only an explicit
// bind takes a port, and random, so that concurrent test processes
// rarely pick the same one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port handed out.
const lowest = 10000

// Port returns a loopback port nothing listens on, below the ephemeral
// range.
func Port() (int, error) {
	high := ephemeralLow()
	if high-lowest < 1000 {
		// A machine whose ephemeral range starts low: any free port.
		return anyPort()
	}
	for range 100 {
		p := lowest + rand.IntN(high-lowest)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return anyPort()
}

// Addr is Port as 127.0.0.1:port.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

func anyPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux's ip_local_port_range; 32768, its default, elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
