// Package chaos is `strata chaos`: a Jepsen-style checker of replication
// that runs a real cluster of `strata broker` processes under a seeded
// nemesis and judges the history afterwards (docs/chaos.md).
//
// A run (Run) has four parts:
//
//   - the cluster: an embedded etcd, one broker subprocess per zone (or
//     more with Options.BrokersPerZone), each reaching etcd through its own
//     TCP fault proxy (pass, drop, stall), each with a client and a
//     replication listener behind their own Kafka-aware TCP proxies (rules
//     per source broker or client: partitions, one-way included), and in
//     WAL mode one bucket per zone on an S3 server the caller started, each
//     zone's bucket reached through its own HTTP fault proxy (pass, outage,
//     slow, 500s, damaging the object a follower is about to download);
//   - the workload: idempotent acks=all franz-go producers writing unique
//     values ("p<producer>-<sequence>") and recording the offset each
//     acknowledgement gave, and one consumer per broker that fetches from
//     that broker only (client.rack = its zone, so followers serve reads,
//     KIP-392), recording every record and high watermark it saw with the
//     broker's incarnation;
//   - the nemesis: a schedule computed from the seed alone (NewSchedule),
//     applied at its times, faults overlapping (one per fault point, at
//     most RF-1 brokers down unless Beyond); targets such as "the leader
//     of chaos-1/2" are resolved when the fault fires; the kinds are a
//     table (kinds.go, netfaults.go: registerKind);
//   - the check: heal, wait for convergence, stop the brokers with SIGTERM,
//     read every replica's log from its data directory (broker/log) and
//     judge the history (Check): nothing acknowledged lost or moved,
//     nothing duplicated or reordered, no phantom read, replicas
//     byte-identical up to the high watermark, offsets contiguous, no high
//     watermark regression within one broker incarnation.
//
// A run passes only with its minimums met (judge: enough acknowledged
// records, every scheduled kind applied, liveness after healing). A
// --history file (history.go) holds every operation; CheckHistory judges
// it again offline.
//
// NewSchedule, Check and judge are pure and table-tested; run_test.go runs
// short forms of the whole thing.
package chaos
