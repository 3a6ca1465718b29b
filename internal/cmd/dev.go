package cmd

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDevCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "dev (being built)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("strata dev is not built yet")
		},
	}
}
