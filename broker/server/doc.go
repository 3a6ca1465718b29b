// Package server assembles one Strata broker process: it opens the broker
// state (package broker) on the data directory, serves the Kafka protocol
// (package protocol) on its listeners (listeners, advertised.listeners,
// listener.security.protocol.map: PLAINTEXT, SSL, SASL_PLAINTEXT,
// SASL_SSL; TLS key pairs re-read when their files change, security.go and
// tls.go), replicates over the inter-broker listener with its own
// credentials (interbroker.go), enforces ACLs when authorizer.class.name
// asks for them (bindings loaded from etcd and followed, or from
// <data dir>/__acls.json standalone; startAuthorizer), serves Prometheus metrics, /healthz and
// /readyz on an HTTP listener, enforces retention periodically, and shuts
// all of it down in order: stop accepting, finish in-flight requests, flush
// and close the logs.
//
// /readyz (and the strata_broker_ready gauge) answers 503 with a short
// reason until the logs are recovered and, in cluster mode, the broker's
// registration is alive and visible in its applied metadata; again while
// the registration is lost, while free file descriptors are short of a
// reserve (fdbudget.go) and during shutdown.
package server
