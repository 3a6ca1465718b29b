package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/server"
)

func newDevCmd() *cobra.Command {
	var (
		f       brokerFlags
		keepDir string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run one local broker on 127.0.0.1:9092 with a throw-away data dir",
		Long: `Run a single Strata broker for development on 127.0.0.1:9092. Data goes to a
temporary directory removed on exit, unless --keep-dir names one to keep.
Prints "strata dev ready: bootstrap=<addr>" once it accepts connections;
Ctrl-C stops it cleanly.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush, err := newLogger(f.logFormat, f.logLevel)
			if err != nil {
				return err
			}
			defer flush()
			if keepDir == "" {
				dir, err := os.MkdirTemp("", "strata-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				f.dataDir = dir
			} else {
				f.dataDir = keepDir
			}
			if err := cmd.Flags().Set("data-dir", f.dataDir); err != nil {
				return err
			}
			cfg, err := f.serverConfig(cmd, log)
			if err != nil {
				return err
			}
			return runBroker(cmd.Context(), cfg, f.shutdownTimeout, log, func(s *server.Server) {
				fmt.Fprintf(cmd.OutOrStdout(), "strata dev ready: bootstrap=%s\n", s.Addr())
			})
		},
	}
	f.register(cmd, "127.0.0.1:9092", "")
	// --data-dir of dev keeps the directory; hide the shared flag's meaning.
	cmd.Flags().Lookup("data-dir").Hidden = true
	cmd.Flags().StringVar(&keepDir, "keep-dir", "", "use (and keep) this data directory instead of a temporary one")
	cmd.Flags().Lookup("log-format").DefValue = "console"
	_ = cmd.Flags().Set("log-format", "console")
	return cmd
}
