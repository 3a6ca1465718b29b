package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/internal/verify"
)

// errVerifyFailed is the exit status 1 of a run that lost, duplicated or
// reordered a record.
var errVerifyFailed = errors.New("verify: acknowledged records lost, duplicated or out of order")

// verifyTamper, set by tests only, alters consumed records before the check
// (verify.Options.Tamper) to prove the command fails when the check does.
var verifyTamper func(*kgo.Record) []*kgo.Record

func newVerifyCmd() *cobra.Command {
	var (
		opts         verify.Options
		listen       string
		duration     time.Duration
		drainTimeout time.Duration
		asJSON       bool
		sec          clientSecurityFlags
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Produce and consume a topic for as long as it runs, checking that no acknowledged record is lost, duplicated or reordered",
		Long: `Run an idempotent acks=all producer and a consumer against a cluster, for
as long as a scenario (a roll, a scale-out, a failover) lasts, and check
what the consumer reads live.

The producer writes records round-robin over the topic's partitions at
--rate, each with a sequence number per partition; retriable errors are
retried by the client and every error answer is counted by its Kafka error
name. The consumer reads the topic from the start and checks each
partition: every acknowledged record exactly once, in the order produced.
Records of other runs in the same topic are skipped (each run has an ID).

The topic is created with --partitions and --replication-factor when it
does not exist (retrying until the cluster takes it; --partitions 0: it
must exist).

HTTP on --listen:
  GET  /status   the counts so far as JSON (lost is final only once done;
                 "pending" counts acknowledged records not consumed yet)
  POST /stop     stop producing, drain (until every acknowledged record
                 was consumed, at most --drain-timeout), answer the final
                 status ("done": true)
  GET  /healthz  200 once producing (a readiness probe)

SIGTERM, Ctrl-C or the end of --duration stop the same way. The final
status is printed on stdout (--json: as /status shows it). Exit status 1
when a record was lost, duplicated or out of order (or the run could not
start).`,
		Example: `  strata verify --bootstrap 127.0.0.1:9092 --topic verify --duration 1m
  strata verify --bootstrap kafka-a-0.kafka:9092,kafka-b-0.kafka:9092 --topic verify \
      --client-rack a --listen :8080 --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case len(opts.Seeds) == 0:
				return errors.New("--bootstrap: at least one broker host:port")
			case opts.Topic == "":
				return errors.New("--topic: required")
			case opts.Rate < 0:
				return fmt.Errorf("--rate %d: want >= 0 (0: as fast as the cluster acknowledges)", opts.Rate)
			case opts.RecordSize < 0:
				return fmt.Errorf("--record-size %d: want >= 0", opts.RecordSize)
			case opts.Partitions < 0:
				return fmt.Errorf("--partitions %d: want >= 0 (0: the topic must exist)", opts.Partitions)
			case opts.ReplicationFactor < 1 && opts.Partitions > 0:
				return fmt.Errorf("--replication-factor %d: want >= 1", opts.ReplicationFactor)
			case duration < 0 || drainTimeout <= 0:
				return fmt.Errorf("--duration %s, --drain-timeout %s: want >= 0 and > 0", duration, drainTimeout)
			}
			security, err := sec.security()
			if err != nil {
				return err
			}
			if opts.ClientOpts, err = security.KgoOpts(); err != nil {
				return err
			}
			opts.Tamper = verifyTamper
			opts.Log = cmd.ErrOrStderr()
			r := verify.NewRunner(opts, drainTimeout)

			if listen != "" {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("--listen %s: %w", listen, err)
				}
				srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer func() {
					// A POST /stop waiting for the final status gets it
					// before the server goes.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = srv.Shutdown(ctx)
				}()
				fmt.Fprintf(cmd.ErrOrStderr(), "verify: HTTP on %s (GET /status, POST /stop, GET /healthz)\n", ln.Addr())
			}

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The final status goes to stdout even when the run never
			// started (stopped while waiting for the topic).
			st, err := r.Run(ctx, duration)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				writeVerifyText(cmd.OutOrStdout(), st)
			}
			switch {
			case err != nil:
				return err
			case !st.OK():
				return errVerifyFailed
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Seeds, "bootstrap", nil, "brokers to bootstrap from, host:port,...")
	fl.StringVar(&opts.Topic, "topic", "", "topic to produce to and consume from")
	fl.Int32Var(&opts.Partitions, "partitions", 6, "partitions of the topic when it is created (0: it must exist)")
	fl.Int16Var(&opts.ReplicationFactor, "replication-factor", 3, "replication factor of the topic when it is created")
	fl.IntVar(&opts.Rate, "rate", 200, "records per second over all partitions (0: as fast as the cluster acknowledges)")
	fl.IntVar(&opts.RecordSize, "record-size", 256, "record value size in bytes")
	fl.StringVar(&opts.ClientRack, "client-rack", "", "the clients' zone: client.rack of the consumer, strata_az=<zone> in the producer's client ID")
	fl.StringVar(&listen, "listen", ":8080", "HTTP address for /status, /stop and /healthz (empty: none)")
	fl.DurationVar(&duration, "duration", 0, "stop after this long (0: until SIGTERM or POST /stop)")
	fl.DurationVar(&drainTimeout, "drain-timeout", 2*time.Minute, "after stopping, how long the consumer may take to read every acknowledged record")
	fl.BoolVar(&asJSON, "json", false, "print the final status as JSON")
	sec.register(fl)
	return cmd
}

func writeVerifyText(w io.Writer, st verify.Status) {
	verdict := "OK"
	if !st.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "verify %s: topic %s (%d partitions), run %s, %.1fs\n", verdict, st.Topic, st.Partitions, st.Run, st.ElapsedSeconds)
	fmt.Fprintf(w, "  produced %d, acked %d, failed %d, consumed %d\n", st.Produced, st.Acked, st.Failed, st.Consumed)
	fmt.Fprintf(w, "  lost %d, duplicated %d, out of order %d (drained: %t)\n", st.Lost, st.Duplicated, st.OutOfOrder, st.Drained)
	fmt.Fprintf(w, "  longest time without an acknowledgement %.2fs, NOT_ENOUGH_REPLICAS %d\n", st.MaxGapSeconds, st.NotEnoughReplicas)
	if len(st.ProduceErrors) > 0 {
		fmt.Fprintf(w, "  produce errors %s\n", countsInt64(st.ProduceErrors))
	}
	if len(st.ConsumeErrors) > 0 {
		fmt.Fprintf(w, "  consume errors %s\n", countsInt64(st.ConsumeErrors))
	}
	for _, ex := range [][]string{st.LostExamples, st.DuplicatedExamples, st.OutOfOrderExamples} {
		for _, e := range ex {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

func countsInt64(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
