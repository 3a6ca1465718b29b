// Package cmd holds the `strata` command tree. Each subcommand lives in its
// own file and is wired here.
package cmd

import (
	"github.com/spf13/cobra"
)

// NewRoot returns the `strata` root command with every subcommand attached.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Kafka-compatible streaming across zones, replicated through per-zone object storage",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newOperatorCmd(),
		newBrokerCmd(),
		newDevCmd(),
		newWALCmd(),
		newTierCmd(),
		newBenchCmd(),
		newChaosCmd(),
		newVerifyCmd(),
	)
	return root
}
