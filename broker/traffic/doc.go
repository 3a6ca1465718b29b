// Package traffic counts the bytes a broker sends and receives per
// (local zone, peer zone, path, direction), so that the cross-zone cost of
// every data path can be read off Prometheus:
//
//	strata_traffic_bytes_total{local_zone, peer_zone, path, direction}
//
// Paths: produce (Produce requests in, responses out), consume (consumer
// Fetch), replication-inline (replica fetches carrying record bytes: the
// leader counts the responses it sends as out and the requests as in; the
// follower counts what it sends as out and the responses as in),
// replication-wal-metadata, object-put and object-get (the WAL path).
// Bytes are whole frames, size prefixes included. The peer zone of a
// broker is its registered rack; of a client, the rack it sent in a Fetch
// (client.rack), else the zone its client ID names ("strata_az=<zone>",
// protocol.ClientIDZone: producers have no client.rack), else "unknown".
// A client's rack that is not a broker's rack is counted as "other":
// clients choose it, and each value would be a new series.
package traffic
