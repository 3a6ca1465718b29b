// Package compat runs one consumer-group scenario against a Strata broker
// with several real Kafka clients: franz-go, Sarama and segmentio/kafka-go
// (as Go libraries), kcat (librdkafka), confluent-kafka-python and
// kafka-python (Debian packages, run with /usr/bin/python3) and KafkaJS
// (npm, run with node through kafkajs.js).
//
// The scenario, per client: create a topic with 4 partitions; produce
// 5,000 keyed records with acks=all (stated explicitly: kafka-go's Writer
// defaults to acks=0, Sarama and kafka-python to acks=1) and the client's
// default producer settings otherwise; start
// a group of two members (client defaults except "start from the earliest
// offset"); wait until every record is consumed and the commits reached
// the end of every partition; restart one member (graceful close, new
// process/instance); wait for the group to be Stable with both members
// assigned; produce 5,000 more records; wait again; stop both members;
// then check that every one of the 10,000 records was consumed, none
// twice (every handover happens after a commit, so at-least-once clients
// must not redeliver here), and that the committed offsets fetched with
// kadm equal the partitions' end offsets.
//
// Variants: kcat also runs with cooperative-sticky and with static
// membership; franz-go and kcat also run with the broker restarted
// (instead of member b), which the group must survive without
// redelivery because its membership is durable.
//
// Security (security_test.go, secure_clients.py): a broker with PLAINTEXT,
// SASL_SSL and mTLS listeners and a SCRAM user; kcat over SASL_SSL with
// SCRAM-SHA-512, confluent-kafka-python with SCRAM-SHA-256, kafka-python
// with PLAIN over TLS (SaslHandshake v0, raw tokens), franz-go with a
// client certificate (principal from its subject); and refusals seen by
// kcat as authentication or TLS errors: a wrong password, an unknown user,
// plaintext to the TLS port, a client certificate from another CA, an
// expired one.
//
// Tools reading __consumer_offsets (offsets_topic_test.go,
// burrow_test.go): kcat consumes the topic and its records decode as
// Kafka's offset commit records holding the committed offsets; Burrow
// 1.2.1 (Debian's package, with Debian's ZooKeeper run standalone on a
// loopback port for Burrow's own use) pointed at a three-broker cluster
// reports a committing group's lag within 10 % of the true lag, and
// follows it as the group commits further.
//
// Tests needing a binary read its path from STRATA_KCAT / STRATA_PYTHON /
// STRATA_BURROW / STRATA_JAVA / STRATA_ZOOKEEPER_JAR (defaults
// /usr/bin/kcat, /usr/bin/python3, /usr/bin/Burrow, java,
// /usr/share/java/zookeeper.jar) and fail, telling to run
// `make test-deps`, when it is missing.
package compat
