// Package brokertest starts Strata brokers for tests: in-process with Start
// (fast, for client tests) or as a `strata broker` subprocess with
// StartProcess (for kill -9 and other process-level tests). Both listen on
// 127.0.0.1 with a random free port and a temporary data directory, and
// are stopped by t.Cleanup.
package brokertest
