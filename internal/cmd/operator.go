package cmd

import (
	"errors"

	"github.com/spf13/cobra"
)

func newOperatorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "operator",
		Short: "operator (being built)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("strata operator is not built yet")
		},
	}
}
