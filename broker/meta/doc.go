// Package meta keeps a Strata cluster's metadata in etcd and runs the
// controller role. docs/metadata.md describes the key layout, the
// compare-and-swap rules and what happens when a broker is lost; in short:
//
//   - Store: typed reads and writes of brokers, topics, partition state. Every
//     write is one etcd transaction that also bumps the metadata version, and
//     every partition-state change is a compare-and-swap on the key's
//     revision (ErrStaleState when it lost).
//   - Registration: a broker's record bound to an etcd lease kept alive by a
//     session; the record disappears when the broker stops renewing it.
//   - Watcher: one etcd watch on the metadata prefix that turns revisions into
//     consistent ClusterState snapshots, in revision order, resyncing after a
//     compaction or a broken watch.
//   - Controller: campaigns for the controller role (etcd election) and, while
//     it holds it, elects leaders from the ISR when leaders die, removes dead
//     brokers, and brokers registered under another epoch than they joined
//     the ISR with (restarted, KIP-903), from ISRs, moves leaderships off
//     brokers in controlled shutdown (Registration.EnterControlledShutdown),
//     runs preferred-leader election, and keeps the preferred leaders of
//     topics pinned to a zone (leader.placement.zone,
//     ControllerOptions.LeaderZone) in that zone, reordering replica lists or
//     reassigning one replica (placement.LeaderZoneTarget). Its writes are
//     fenced by its election key, so a deposed controller cannot write.
//
// The decisions (which leader, which ISR) are pure functions in election.go,
// table-tested without etcd; the etcd wiring is tested against a real
// embedded etcd on loopback (Embedded, also used by `strata dev`).
package meta
