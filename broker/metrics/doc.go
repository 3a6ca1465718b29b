// Package metrics holds the Prometheus metrics of a Strata broker: request
// rate, latency and errors per API, network bytes in and out, open
// connections, and per-partition log offsets and sizes (collected at scrape
// time from the broker state).
package metrics
