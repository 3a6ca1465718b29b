// Package hostile sends abusive inputs (issue #14 item 6) to a `strata
// broker` subprocess in cluster mode while a well-behaved franz-go producer
// (acks=all, idempotent) and consumer use the same broker. For each input
// the broker answers with an error or closes the offending connection, its
// resident memory (VmRSS from /proc) stays under rssBound, the producer
// keeps getting acknowledgements with a p99 within latencyFactor of its
// unloaded p99 (measured first, in the same run), and at the end every
// acknowledged record is read back. Inputs of issue #26: compression bombs of every codec,
// many per Produce request (the per-request decompression budget), and
// concurrent ListOffsets(timestamp=0) over stored bombs (TestHostileClients);
// 10,000 idle sockets from one host while another client connects and
// produces, and an authenticated (SCRAM) client gets in within a second
// (TestIdleSocketFlood); a standalone broker under a low
// RLIMIT_NOFILE held by idle clients until /readyz reports it short of
// file descriptors (TestReadyzFDStarved).
package hostile
