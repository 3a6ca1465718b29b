package cmd

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBrokerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "broker",
		Short: "broker (being built)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("strata broker is not built yet")
		},
	}
}
