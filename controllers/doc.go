// Package controllers holds the Strata operator's reconcilers, one per
// custom resource, and the pure desired-state builders they use.
//
// The builders (desired.go, brokerconfig.go, brokerids.go) turn a
// KafkaCluster and its zones' FastBuckets into the exact Kubernetes objects
// the operator wants: per zone a StatefulSet pinned to the zone, a
// ConfigMap with the broker configuration (broker.rack and the zone's fast
// bucket, the client listeners and the operator's mTLS inter-broker
// listener REPLICATION), the broker Services, the managed etcd (on TLS),
// the NetworkPolicies (networkpolicy.go) and a PodDisruptionBudget. They
// have no I/O and are tested with table tests and
// golden files (go test ./controllers -run Golden -update).
//
// The reconcilers read the world, call the builders and write the result
// with server-side apply under the field manager strata-operator
// (apply.go): fields they set are forced back when someone else changes
// them, fields other managers own are left alone. Status follows the
// kstatus conventions (conditions.go: Ready, Reconciling, Stalled,
// observedGeneration). The envtest suite checks that wiring against a
// real kube-apiserver. The KafkaCluster reconciler also probes the metadata etcd
// (etcdhealth.go: Status and AlarmList through clientv3, bounded by a
// short timeout) for the status.metadata health line, and reads the
// cluster through the Kafka admin API (kafkaadmin.go: one kadm client per
// cluster, reached through pluggable BrokerEndpoints): kafkahealth.go
// fills status.kafka (registered brokers, controller, offline and
// under-replicated partitions, leaders per zone) and each zone's WAL state
// from the brokers' /metrics, decides Ready and Degraded from pods, Kafka
// and etcd, and moves drifted leaders back to their preferred replica with
// rate-limited preferred-leader elections. The decisions (health summary,
// drift, readiness) are pure functions with table tests. A zone whose
// FastBucket is missing, in another zone or refused by the operator's
// BucketPolicy (fastbucket_policy.go) stops the cluster before anything
// is written (Stalled), so no broker is rolled onto it.
//
// Certificates (kafkacluster_pki.go): the cluster CA and the broker,
// etcd and operator certificates it issues (internal/pki), and the clients
// CA of tls KafkaUsers, are kept in Secrets owned by the KafkaCluster,
// re-issued when due, foreign or missing a name, and listed in
// status.certificates; no renewal restarts a broker (they re-read the
// mounted files). Clients get their trust from the public Secret
// <cluster>-cluster-ca-cert (ca.crt, ca.p12, ca.password; no key),
// rewritten only when those certificates change. The admin client reaches brokers on REPLICATION with
// the operator's certificate, a super user (kafkaadmin.go
// ServiceEndpoints; the PLAINTEXT listener only while a cluster from
// before REPLICATION rolls onto it).
//
// Secure by default (security_defaults.go): empty spec.listeners render
// one SASL_SSL listener, an unset spec.security.authorization renders
// ACLs with the operator's and the brokers' principals as super users,
// except for a cluster whose stored zone configs show an earlier
// release's PLAINTEXT/no-authorizer render (LegacySecurityDefaults, a
// pure function of spec and configs): it keeps those until the fields
// are set, so an operator upgrade cuts off no client.
//
// The KafkaCluster reconciler also carries out the decisions of package
// plan: rolling restarts one broker at a time across the cluster
// (kafkacluster_roll.go: StatefulSets with OnDelete, a pod is current when
// its template-hash annotation matches, plan.NextRestart names the one pod
// to delete), the drain of brokers before a scale-down or zone removal
// and the rebalance after a scale-up (kafkacluster_scale.go: NextDrain,
// RebalanceMoves, reassignments capped by spec.rebalance), with the
// replication throttle of spec.rebalance.throttle set on the brokers and
// topics of the moves in flight and removed after them
// (kafkacluster_throttle.go: DesiredThrottle, derived from the cluster's
// reassignments and configs every time, nothing remembered). It reads pods
// and StatefulSets from the API server for these, never from the cache,
// and does nothing destructive when Kafka cannot be read.
//
// The KafkaTopic reconciler (kafkatopic_controller.go) owns topics through
// the Kafka admin API of their cluster (AdminPool, kafkaadmin.go): create,
// incremental config changes, added partitions, replication factor changes
// by zone-aware reassignment, deletion per deletionPolicy, and a periodic
// resync that reverts changes made with other tools. Its decisions (which
// config operations, which configs drifted, where replicas go when the
// replication factor changes) are pure functions in kafkatopic_plan.go.
//
// The KafkaUser reconciler (kafkauser_controller.go) owns a SCRAM user and
// the ACLs of its principal the same way: it writes the client settings to
// a Secret it controls (the only Secrets the operator caches), sets the
// credential with AlterUserScramCredentials when the password in that
// Secret differs from the one last set, and makes the principal's ACLs the
// spec's set with Describe/Create/DeleteAcls (DesiredACLs and PlanACLs are
// pure functions); deleting it deletes ACLs and credentials. A tls user
// (kafkauser_tls.go) gets a client certificate of the clients CA in its
// Secret instead (principal User:CN=<name>; PEM files and a PKCS#12
// keystore), and is not Ready while its cluster has no SSL listener that
// takes client certificates. Names of the operator's own identities
// (ReservedUserNames) are refused. Both reconcilers run their steps
// through runSteps (steps.go).
package controllers
