// Package notify tells the readers of a source which sources changed.
//
// A partition's log (appends) and replica state (high watermark, role,
// uploads) are sources; a fetch session (a follower's or a consumer's) and a
// follower's fetcher are readers that follow many partitions. Instead of
// checking every partition it follows at every round (and, on the
// leader, parking on a channel per partition), a reader subscribes once
// to each source (List), and each source's change marks the partition in
// the reader's one Set and, when the change is one a parked reader must
// answer, signals the Set's one channel. A round then reads the marked
// partitions only.
package notify
