// Package server assembles one Strata broker process: it opens the broker
// state (package broker) on the data directory, serves the Kafka protocol
// (package protocol) on a listener, serves Prometheus metrics, /healthz and
// /readyz on an HTTP listener, enforces retention periodically, and shuts
// all of it down in order: stop accepting, finish in-flight requests, flush
// and close the logs.
//
// /readyz (and the strata_broker_ready gauge) answers 503 with a short
// reason until the logs are recovered and, in cluster mode, the broker's
// registration is alive and visible in its applied metadata; again while
// the registration is lost and during shutdown.
package server
