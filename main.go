// Command strata is the Strata operator, broker and developer tooling in one
// binary: `strata operator`, `strata broker`, `strata dev`, `strata bench`,
// `strata chaos`, `strata verify`, `strata wal inspect`.
package main

import (
	"os"

	"github.com/strata-dev/strata/internal/cmd"
)

func main() {
	if err := cmd.NewRoot().Execute(); err != nil {
		os.Exit(1)
	}
}
