package meta

import (
	"fmt"
	"strconv"
	"strings"
)

// keys builds the etcd keys of one cluster. Everything the watcher follows
// lives under root; consumer offsets (write-heavy, not watched) live beside
// it under offsets/ so that commits do not wake every broker.
//
//	/strata/<cluster>/meta/version                     metadata version (the key's etcd version)
//	/strata/<cluster>/meta/cluster-id                  Kafka cluster ID, created once
//	/strata/<cluster>/meta/brokers/<id>                BrokerInfo JSON, bound to the broker's lease
//	/strata/<cluster>/meta/topics/<name>               TopicInfo JSON
//	/strata/<cluster>/meta/partitions/<name>/<p>       PartitionState JSON
//	/strata/<cluster>/meta/controller/<lease>          election candidates (value: broker ID)
//	/strata/<cluster>/meta/broker-configs/<id>         dynamic broker configs of one broker (JSON map)
//	/strata/<cluster>/meta/broker-configs/default      cluster-wide dynamic broker config defaults
//	/strata/<cluster>/meta/client-quotas/<hash>        one client quota entity and its values (ClientQuota JSON)
//	/strata/<cluster>/offsets/...                      consumer group offsets
//	/strata/<cluster>/groups/...                       consumer group membership
//	/strata/<cluster>/group-claims/<group>             the coordinator's claim on a group (fences deposed coordinators' writes)
//	/strata/<cluster>/txn-offsets/...                  pending transactional offset commits (broker/meta/offsets)
//	/strata/<cluster>/transactions/<id>                transaction coordinator state (broker/meta/txnstate; id path-escaped)
//	/strata/<cluster>/credentials/scram/<user>         SCRAM credentials (auth.UserCredentials JSON; user path-escaped)
//	/strata/<cluster>/credentials/server-secret        32 random bytes, created once: unknown users' SCRAM salts derive from it
//	/strata/<cluster>/credentials/acls/<hash>           one ACL binding (auth.Binding JSON; hash: SHA-256 of it, 128 bits)
type keys struct {
	root        string // /strata/<cluster>/meta/
	offsets     string // /strata/<cluster>/offsets/
	groups      string // /strata/<cluster>/groups/
	credentials string // /strata/<cluster>/credentials/
	txnOffsets  string // /strata/<cluster>/txn-offsets/
	txns        string // /strata/<cluster>/transactions/
	groupClaims string // /strata/<cluster>/group-claims/
}

// newKeys accepts a cluster name, or several '/'-separated segments (the
// operator names clusters <namespace>/<name>: its metadata.etcd.prefix is
// /strata/<namespace>/<name>/).
func newKeys(cluster string) (keys, error) {
	for _, seg := range strings.Split(cluster, "/") {
		if seg == "" || seg == "meta" || seg == "offsets" || seg == "groups" || seg == "credentials" || seg == "txn-offsets" || seg == "transactions" || seg == "group-claims" || strings.ContainsAny(seg, " \t\n") {
			return keys{}, fmt.Errorf("cluster name %q: must be non-empty '/'-separated segments without spaces (and no segment named meta, offsets, groups, credentials, txn-offsets, transactions or group-claims)", cluster)
		}
	}
	base := "/strata/" + cluster + "/"
	return keys{root: base + "meta/", offsets: base + "offsets/", groups: base + "groups/", credentials: base + "credentials/",
		txnOffsets: base + "txn-offsets/", txns: base + "transactions/", groupClaims: base + "group-claims/"}, nil
}

func (k keys) version() string              { return k.root + "version" }
func (k keys) clusterID() string            { return k.root + "cluster-id" }
func (k keys) brokers() string              { return k.root + "brokers/" }
func (k keys) broker(id int32) string       { return k.brokers() + strconv.Itoa(int(id)) }
func (k keys) topics() string               { return k.root + "topics/" }
func (k keys) topic(name string) string     { return k.topics() + name }
func (k keys) partitions() string           { return k.root + "partitions/" }
func (k keys) partitionsOf(t string) string { return k.partitions() + t + "/" }
func (k keys) partition(tp TopicPartition) string {
	return k.partitionsOf(tp.Topic) + strconv.Itoa(int(tp.Partition))
}

// brokerConfig is the key of a broker's dynamic configs ("" is the
// cluster-wide default, Kafka's broker resource with an empty name).
func (k keys) brokerConfig(broker string) string {
	if broker == "" {
		broker = defaultBrokerConfig
	}
	return k.root + "broker-configs/" + broker
}

// defaultBrokerConfig is the key segment of the cluster-wide defaults.
const defaultBrokerConfig = "default"

// controller is the election prefix; concurrency.Election appends "/".
func (k keys) controller() string { return k.root + "controller" }

// keyKind classifies a key under root.
type keyKind int

const (
	kindUnknown keyKind = iota
	kindVersion
	kindBroker
	kindTopic
	kindPartition
	kindController
	kindClusterID
	kindBrokerConfig
	kindClientQuota
)

// parse classifies key and extracts its identifiers.
func (k keys) parse(key string) (kind keyKind, broker int32, topic string, tp TopicPartition) {
	rest, ok := strings.CutPrefix(key, k.root)
	if !ok {
		return kindUnknown, 0, "", tp
	}
	switch rest {
	case "version":
		return kindVersion, 0, "", tp
	case "cluster-id":
		return kindClusterID, 0, "", tp
	}
	section, name, ok := strings.Cut(rest, "/")
	if !ok {
		return kindUnknown, 0, "", tp
	}
	switch section {
	case "brokers":
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return kindUnknown, 0, "", tp
		}
		return kindBroker, int32(id), "", tp
	case "topics":
		return kindTopic, 0, name, tp
	case "partitions":
		t, p, ok := strings.Cut(name, "/")
		if !ok {
			return kindUnknown, 0, "", tp
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return kindUnknown, 0, "", tp
		}
		return kindPartition, 0, "", TopicPartition{Topic: t, Partition: int32(n)}
	case "controller":
		return kindController, 0, "", tp
	case "client-quotas":
		// topic carries the record's name (a hash: the entity is in it).
		return kindClientQuota, 0, name, tp
	case "broker-configs":
		// topic carries the resource name: "" (default) or a broker ID.
		if name == defaultBrokerConfig {
			return kindBrokerConfig, 0, "", tp
		}
		if _, err := strconv.ParseInt(name, 10, 32); err != nil {
			return kindUnknown, 0, "", tp
		}
		return kindBrokerConfig, 0, name, tp
	}
	return kindUnknown, 0, "", tp
}

// validTopicName applies Kafka's rules: 1..249 of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: %q contains %q (allowed: ASCII letters, digits, '.', '_', '-')", ErrInvalidTopic, name, r)
		}
	}
	return nil
}
