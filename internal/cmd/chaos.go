package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/internal/chaos"
)

// errChaosFailed makes `strata chaos` exit non-zero after it printed its
// findings.
var errChaosFailed = errors.New("chaos: checks failed")

func newChaosCmd() *cobra.Command {
	var (
		o        chaos.Options
		faults   string
		keepDir  string
		asJSON   bool
		logLevel int
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a 3-zone cluster of broker processes under a seeded nemesis and check that no acknowledged record is lost",
		Long: `Run a Jepsen-style check of replication (docs/chaos.md): a 3-zone cluster of
` + "`strata broker`" + ` processes (this binary) with an embedded etcd reached
through one fault proxy per broker, a slow-tier bucket on a local Versity
Gateway and, with --replication wal (default), one bucket per zone there,
each zone's bucket behind its own fault proxy. Idempotent acks=all
producers and one consumer per broker (client.rack = its zone, so
followers serve reads), consumer-group members that commit and move,
transactional producers (some transactions aborted) with read_committed
consumers, a compacted topic the cleaner works on, and a tiered topic
whose segments leave the brokers' disks run for --duration while a nemesis driven by --seed kills, freezes and restarts
brokers (overlapping faults, up to two brokers down at once and
sometimes more), cuts them from etcd, from each other (partitions,
one-way included) and from their clients, isolates whole zones, breaks
and slows buckets, corrupts and deletes WAL objects as followers download
them, reassigns partitions and elects preferred leaders.
Then everything is healed, the cluster must converge, the brokers stop
cleanly and their logs are read from disk and checked: acknowledged
records present exactly once, in order, at their offset, in every
replica; no consumer read a record the final log does not hold; replica
logs byte-identical up to the high watermark; offsets contiguous; no
high watermark moved backwards on one broker incarnation; no committed
group offset going backwards, past the log or over a gap of undelivered
records; transactions all or nothing, aborted ones never read, none read
past the last stable offset; every compacted key ending with its last
acknowledged value; every read of the tiered topic from offset 0 whole.
With --zone-local-producers (WAL only) the brokers run zone-local produce
and every producer names a zone in its client ID (strata_az=<zone>), so
its batches reach their leader through its zone's broker and bucket; the
run also fails when no produce was forwarded.

The same seed gives the same fault schedule (--verbose prints it; targets
such as "the leader of chaos-1/2" are resolved when the fault fires).
A run also needs --min-acked acknowledged records, every scheduled fault
kind applied at least once, and the healed cluster serving produce and
consume within --liveness-bound; "reason" says what failed.
Exits non-zero when a check fails; the run's directory (broker data and
logs) is then kept and printed. --history writes every operation as JSON
lines; "strata chaos check FILE" judges such a file again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bad flags fail before anything is started or created.
			if o.Replication != "wal" && o.Replication != "classic" {
				return fmt.Errorf("--replication %q: want wal or classic", o.Replication)
			}
			if o.Duration < 15*time.Second {
				return fmt.Errorf("--duration %v: at least 15s (5s warm-up, 5s cool-down)", o.Duration)
			}
			if o.ZoneLocalProducers && o.Replication != "wal" {
				return errors.New("--zone-local-producers needs --replication wal (forwarded batches go through the zone buckets)")
			}
			kinds, err := chaos.ParseKinds(faults)
			if err != nil {
				return err
			}
			o.Kinds = kinds
			if o.Binary, err = os.Executable(); err != nil {
				return err
			}
			root := keepDir
			if root == "" {
				if root, err = os.MkdirTemp("", fmt.Sprintf("strata-chaos-%d-", o.Seed)); err != nil {
					return err
				}
			} else if entries, err := os.ReadDir(root); err == nil && len(entries) > 0 {
				return fmt.Errorf("--keep-dir %s is not empty: a run needs a fresh directory", root)
			}
			o.Dir = root
			progress := cmd.ErrOrStderr()
			if asJSON && !o.Verbose {
				progress = io.Discard
			}
			o.Log = progress
			log, flush, err := newLogger("console", logLevel)
			if err != nil {
				return err
			}
			defer flush()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Both modes need the S3 server: the tier bucket of the tiered
			// workload; WAL mode the zone buckets too.
			cmd.SetContext(ctx)
			bin, err := versitygwBinary(cmd, log)
			if err != nil {
				return err
			}
			if err := os.Setenv("STRATA_VERSITYGW", bin); err != nil {
				return err
			}
			tb := &devTB{dir: filepath.Join(root, "s3"), log: log.WithName("s3")}
			buckets := []string{chaos.TierBucket}
			if o.Replication == "wal" {
				for _, z := range o.Zones {
					buckets = append(buckets, chaos.BucketPrefix+z)
				}
			}
			srv, err := tb.start(buckets)
			defer func() {
				for i := len(tb.cleanups) - 1; i >= 0; i-- {
					tb.cleanups[i]()
				}
			}()
			if err != nil {
				return err
			}
			o.S3 = &chaos.S3{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
			res, err := chaos.Run(ctx, o)
			if err != nil {
				return fmt.Errorf("chaos (seed %d; data and broker logs kept in %s): %w", o.Seed, root, err)
			}
			if !res.OK || keepDir != "" {
				res.Dir = root
			} else {
				defer os.RemoveAll(root)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				printChaos(out, res)
			}
			if !res.OK {
				return errChaosFailed
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&o.Seed, "seed", 1, "seed of the fault schedule (same seed, same schedule)")
	fl.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the workload and the nemesis run (at least 15s)")
	fl.StringVar(&o.Replication, "replication", "wal", "wal (per-zone buckets on a local Versity Gateway) or classic (broker to broker; no bucket faults; the tier bucket in both)")
	fl.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	fl.StringSliceVar(&o.Zones, "zones", []string{"a", "b", "c"}, "zones (at least 3)")
	fl.IntVar(&o.BrokersPerZone, "brokers-per-zone", 1, "brokers per zone (2: reassignments move replicas between a zone's brokers)")
	fl.IntVar(&o.Topics, "topics", 3, "topics")
	fl.Int32Var(&o.Partitions, "partitions", 3, "partitions per topic (replication factor 3, min.insync.replicas 2)")
	fl.IntVar(&o.Producers, "producers", 3, "idempotent acks=all producers")
	fl.IntVar(&o.Rate, "rate", 300, "records per second over all producers")
	fl.BoolVar(&o.ZoneLocalProducers, "zone-local-producers", false, "turn on zone-local produce (wal.zonelocal.produce.enable) and give every producer a client ID naming a zone (strata_az=<zone>, zones in turn): produce goes through the zone's broker and bucket to the leader; the run fails if nothing was forwarded")
	fl.StringVar(&faults, "faults", "", "comma-separated fault kinds to use, all, or none (default all: "+strings.Join(chaos.AllKinds, ",")+")")
	fl.IntVar(&o.MinAcked, "min-acked", 0, "fewest acknowledged records for the run to pass (0: a tenth of --rate over --duration less 10s)")
	fl.DurationVar(&o.LivenessBound, "liveness-bound", time.Minute, "how long the healed cluster has to take a record on every partition and serve it back")
	fl.StringVar(&o.History, "history", "", "write every operation (produces, reads, faults, final logs) with its time to this file as JSON lines; `strata chaos check FILE` judges it again")
	fl.StringVar(&keepDir, "keep-dir", "", "run in (and keep) this directory, which must be empty or absent")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "print the schedule and each fault as it is applied (stderr)")
	fl.IntVar(&logLevel, "log-verbosity", 0, "verbosity of the harness's own log (the S3 server)")
	cmd.AddCommand(newChaosCheckCmd())
	return cmd
}

func newChaosCheckCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Judge a `strata chaos --history` file again, offline, with the same checker",
		Long: `Read a history written by ` + "`strata chaos --history FILE`" + ` (JSON lines: every
produce, read, high watermark regression and fault with its time, then the
final high watermarks, replica logs and the run's result) and judge it
again with the same checker and minimums as the run: it prints the same
verdict and exits non-zero when the history fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			res, err := chaos.CheckHistory(f)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if asJSON {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(res); err != nil {
					return err
				}
			} else {
				printChaos(cmd.OutOrStdout(), res)
			}
			if !res.OK {
				return errChaosFailed
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

// printChaos is the human-readable summary.
func printChaos(w io.Writer, r *chaos.Result) {
	verdict := "OK"
	if !r.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "strata chaos: seed %d, %.0fs, %s replication, %d brokers, %d partitions: %s\n",
		r.Seed, r.DurationS, r.Replication, r.Brokers, r.Partitions, verdict)
	fmt.Fprintf(w, "  faults      %s\n", counts(r.Faults))
	if len(r.FaultErrors) > 0 {
		fmt.Fprintf(w, "  not applied %s\n", counts(r.FaultErrors))
	}
	fmt.Fprintf(w, "  records     %d sent, %d acknowledged, %d not acknowledged, %d consumed\n", r.Sent, r.Acked, r.Unacknowledged, r.Consumed)
	fmt.Fprintf(w, "  lost %d, misplaced %d, duplicated %d, out of order %d, phantom reads %d, divergent replicas %d, offset gaps %d, hwm regressions %d\n",
		r.Lost, r.Misplaced, r.Duplicated, r.OutOfOrder, r.PhantomReads, r.DivergentReplicas, r.OffsetGaps, r.HWMRegressions)
	fmt.Fprintf(w, "  minimum     %d acknowledged records\n", r.MinAcked)
	if z := r.ZoneLocal; z != nil && z.Enabled {
		fmt.Fprintf(w, "  zone-local  %d producers; %d objects with forwarded records, %d of them shared with WAL uploads; %d own objects put (%d failed requests), %d read by leaders; partitions forwarded %d, appended %d (broker metrics, at least)\n",
			len(z.Clients), z.ForwardedObjects, z.SharedObjects, z.ObjectsPut, z.ObjectRequestsFailed, z.ObjectsRead, z.ForwardedPartitions, z.AppendedPartitions)
	}
	fmt.Fprintf(w, "  live        %v (%.1fs after healing, bound %.0fs)\n", r.Live, r.LivenessS, r.LivenessBoundS)
	fmt.Fprintf(w, "  converged   %v (%.1fs after healing)\n", r.Converged, r.ConvergeS)
	if len(r.BucketRequests) > 0 {
		zones := make([]string, 0, len(r.BucketRequests))
		for z := range r.BucketRequests {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		var parts []string
		for _, z := range zones {
			parts = append(parts, fmt.Sprintf("%s=%d (%d failed on purpose)", z, r.BucketRequests[z].Requests, r.BucketRequests[z].Injected))
		}
		fmt.Fprintf(w, "  buckets     %s\n", strings.Join(parts, " "))
	}
	if r.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", r.Reason)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "  %s\n", f)
	}
	if len(r.ErrorsSeen) > 0 {
		fmt.Fprintf(w, "  errors seen %s\n", counts(r.ErrorsSeen))
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "  data and broker logs (broker-<id>.log) kept in %s\n", r.Dir)
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
