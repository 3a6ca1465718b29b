package server

import (
	"fmt"
	"os"
	"syscall"
)

// File descriptors are the budget a broker runs out of first with many
// partitions: every segment holds its .log, .index and .timeindex (and a
// .txnindex once it has aborted transactions) open, every partition its
// WAL pointer file, every client and peer a socket. Past RLIMIT_NOFILE,
// accept, segment rolls and the creation of new replicas fail ("too many
// open files") while the process otherwise looks healthy. /readyz reports
// such a broker unready once its free descriptors fall under fdReserve,
// before that happens: the Service stops sending it new clients and the
// operator's rolls wait, while the data path keeps the descriptors it has.

// fdReserve is how many descriptors must stay free for the broker to be
// ready: 5% of the limit, at least 64 (a few segment rolls and
// connections) and at most 4096.
func fdReserve(limit uint64) uint64 {
	return min(max(limit/20, 64), 4096)
}

// fdStarved says whether open descriptors out of limit leave less than
// fdReserve free, and if so why (the /readyz body).
func fdStarved(open, limit uint64) (bool, string) {
	if limit == 0 {
		return false, ""
	}
	reserve := fdReserve(limit)
	if open+reserve <= limit {
		return false, ""
	}
	return true, fmt.Sprintf("file descriptors nearly exhausted: %d open of RLIMIT_NOFILE %d (keeping %d free); fewer partitions or a higher limit", open, limit, reserve)
}

// fdHeadroom is broker.Config.FDHeadroom: the descriptors the process may
// still open before its free ones fall under fdReserve. New partitions are
// refused past it (POLICY_VIOLATION) rather than admitted into a broker
// that would turn unready or fail to open their files.
func fdHeadroom() (int64, bool) {
	open, limit, ok := fdUsage()
	if !ok || limit == 0 || limit > 1<<40 { // unknown, or unlimited
		return 0, false
	}
	return int64(limit) - int64(open) - int64(fdReserve(limit)), true
}

// FDHeadroomShare is broker.Config.FDHeadroom for one of n brokers that
// run in one process (strata dev): they share its RLIMIT_NOFILE, and each
// checks only its own share of a new topic's replicas, so each may count
// on 1/n of the headroom. Without it three brokers each admitted a topic
// whose replicas fit the limit once, then together opened three times
// that ("too many open files").
func FDHeadroomShare(n int) func() (int64, bool) {
	return shareHeadroom(fdHeadroom, n)
}

func shareHeadroom(headroom func() (int64, bool), n int) func() (int64, bool) {
	if n <= 1 {
		return headroom
	}
	return func() (int64, bool) {
		free, ok := headroom()
		if !ok {
			return 0, false
		}
		if free < 0 {
			return free, true
		}
		return free / int64(n), true
	}
}

// fdUsage returns the process's open descriptors and its soft
// RLIMIT_NOFILE. ok is false where they cannot be read (no /proc): the
// check is then skipped.
func fdUsage() (open, limit uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, false
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, 0, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, 0, false
	}
	// The directory's own descriptor was open while it was listed.
	return uint64(len(names)) - 1, lim.Cur, true
}
