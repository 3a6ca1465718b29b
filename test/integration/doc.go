// Package integration drives a `strata broker` subprocess with real
// clients: kcat (librdkafka) producing and consuming 10,000 records, and a
// crash test that kills the broker with SIGKILL during a produce stream and
// checks what survives. The tests need kcat (/usr/bin/kcat, or STRATA_KCAT),
// installed by `make test-deps`.
package integration
