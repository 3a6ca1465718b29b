// Package netem injects network latency into TCP connections: a one-way
// delay on each direction of a connection, the way a link between two
// availability zones adds it.
//
// Wrap returns a net.Conn whose written chunks reach the peer, and whose
// received chunks reach the reader, a fixed latency after they were
// written or arrived. Each direction is a queue of chunks with due times
// (arrival + latency) drained by one goroutine, so order is kept and
// bandwidth is not serialised: many chunks are in flight at once, as on a
// long fat link, and a chunk written while others are queued is not
// delayed by them beyond its own due time. Queued bytes are bounded per
// direction (MaxQueued); past it Write blocks (honouring the write
// deadline) and the receiving side stops reading (TCP backpressure).
//
// Deadlines apply to the wrapper: a Read waits for delayed data until its
// read deadline, a Write only waits for queue space. Close delivers what
// is queued for sending at its due time if that is within CloseLinger,
// discards the rest and anything not yet read, closes the connection and
// returns once both goroutines have exited.
//
// Dialer wraps a dial function: connections for which Remote says the
// peer is across the link are wrapped, the others are returned as they
// are. Stats counts wrapped connections and delayed bytes; strata dev
// exports it per broker and strata bench reports it.
package netem
