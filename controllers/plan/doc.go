// Package plan holds the operator's decisions about a running Kafka
// cluster as pure functions, in the style of cluster-api's machineset
// delete policy: which broker pod may be deleted now for a rolling restart
// (NextRestart, gated per partition by RestartBlockers), which broker to drain next before a
// scale-down or zone removal (NextDrain), and which replicas to move onto
// new brokers after a scale-up (RebalanceMoves).
//
// Every function is a function of its arguments only: the brokers the spec
// wants (Wanted), a Kafka metadata view (Metadata: registered brokers with
// their rack, partitions with replicas, ISR, leader and reassignment in
// flight, min.insync.replicas per topic) and the broker pods' states (Pod).
// No I/O, no clock, no randomness; the same input gives the same answer, so
// every rule is pinned by a table test. The reconciler gathers the inputs
// (kadm, converted by FromKadm; the pod cache), calls these, and carries
// out the answer; it never decides on its own. Replica moves are computed with broker/placement
// (Drain, Rebalance), the same rules the brokers place topics with.
//
// Moves balance bytes as well as replica counts when the metadata carries
// replica sizes (WithSizes, from DescribeAllLogDirs); the answers of
// RebalanceMoves and NextDrain also say how many moves and bytes the whole
// plan still has (Planned, PlannedBytes, BytesLeft), for status.
//
// docs/operator.md "Rolling restarts and scaling: decision rules" lists the
// rules; the functions' comments say why each one is there.
package plan
