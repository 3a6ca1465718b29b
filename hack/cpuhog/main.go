// Command cpuhog keeps the machine's CPUs busy for `make test-stress`:
// -per-core busy goroutines per CPU (default 2, so the tests beside it get
// about a third of each CPU they want), each on its own thread, until it
// is signalled or the process that started it dies.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// init runs on the main thread: keep main there, so that the
// parent-death signal is set on a thread that lives as long as the hog.
func init() { runtime.LockOSThread() }

func main() {
	perCore := flag.Int("per-core", 2, "busy goroutines per CPU")
	flag.Parse()
	if err := dieWithParent(); err != nil {
		fmt.Fprintln(os.Stderr, "cpuhog:", err)
		os.Exit(1)
	}
	n := *perCore * runtime.NumCPU()
	// One thread per spinner: with the default GOMAXPROCS they would
	// share NumCPU threads and load the machine only one to one.
	runtime.GOMAXPROCS(n + 1)
	for range n {
		go spin()
	}
	fmt.Fprintf(os.Stderr, "cpuhog: %d busy goroutines on %d CPUs (pid %d)\n", n, runtime.NumCPU(), os.Getpid())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	<-sig
}

// sink keeps spin's arithmetic from being optimised away.
var sink uint64

func spin() {
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink = x
	}
}
