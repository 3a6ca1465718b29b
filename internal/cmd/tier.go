package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
)

func newTierCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tier",
		Short: "Tools for the slow tier (tiered storage manifests)",
	}
	cmd.AddCommand(newTierInspectCmd())
	return cmd
}

type tierInspectFlags struct {
	s3Flags
	json    bool
	cluster string
	verify  bool
}

func newTierInspectCmd() *cobra.Command {
	var f tierInspectFlags
	cmd := &cobra.Command{
		Use:   "inspect s3://<bucket> <topic> <partition>",
		Short: "Print a partition's slow-tier manifest (segments, offsets, epochs, sizes, CRCs)",
		Long: `Print the newest manifest of a partition in the slow-tier bucket
(docs/tiered-storage.md): the tier's start and end offsets, the leader epoch
and sequence that wrote it, and every segment with its offsets, uploader
epoch, size, CRC-32C and max timestamp. --verify reads every segment and
checks its size and CRC (exits non-zero on a mismatch). When several
clusters or incarnations of the topic are in the bucket, each is printed;
--cluster narrows the search.

Endpoint, region and credentials as for "strata wal inspect" (flags, the
AWS_* environment, --env-prefix STRATA_TIER as a broker pod has them, or
--credentials-dir).`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			bucket, ok := strings.CutPrefix(args[0], "s3://")
			bucket = strings.TrimSuffix(bucket, "/")
			if !ok || bucket == "" || strings.Contains(bucket, "/") {
				return fmt.Errorf("want s3://<bucket>, got %q", args[0])
			}
			part, err := strconv.ParseInt(args[2], 10, 32)
			if err != nil || part < 0 {
				return fmt.Errorf("partition %q is not a partition number", args[2])
			}
			st, err := f.store(ctx, bucket)
			if err != nil {
				return err
			}
			defer st.Close()
			reps, err := inspectTier(ctx, st, f.cluster, args[1], int32(part), f.verify)
			if err != nil {
				return err
			}
			if f.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(reps); err != nil {
					return err
				}
			} else {
				for _, r := range reps {
					printTierReport(cmd.OutOrStdout(), r)
				}
			}
			bad := 0
			for _, r := range reps {
				bad += r.BadSegments
			}
			if bad > 0 {
				return fmt.Errorf("%d segments do not match their manifest", bad)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print JSON instead of text")
	fl.BoolVar(&f.verify, "verify", false, "read every segment and check its size and CRC-32C")
	fl.StringVar(&f.cluster, "cluster", "", "cluster name in the keys (tier/<cluster>/...); default: any")
	f.register(fl, "STRATA_TIER")
	return cmd
}

// tierReport is one partition's manifest as inspect prints it.
type tierReport struct {
	Prefix      string            `json:"prefix"`
	Manifest    tier.Manifest     `json:"manifest"`
	Verified    map[string]string `json:"verified,omitempty"` // segment key -> "ok" or the error
	BadSegments int               `json:"badSegments"`
}

// inspectTier finds the partition's prefixes (tier/<cluster>/<topic>-<id>/<p>/)
// by listing manifests, and loads the newest manifest of each.
func inspectTier(ctx context.Context, st objstore.Store, cluster, topic string, partition int32, verify bool) ([]tierReport, error) {
	listPrefix := "tier/"
	if cluster != "" {
		listPrefix += strings.Trim(cluster, "/") + "/"
	}
	objs, err := st.List(ctx, listPrefix)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^tier/(.+)/` + regexp.QuoteMeta(topic) + `-([0-9a-f]{32})/` + strconv.Itoa(int(partition)) + `/manifest/`)
	type loc struct{ cluster, id string }
	found := map[loc]bool{}
	for _, o := range objs {
		if m := re.FindStringSubmatch(o.Key); m != nil {
			found[loc{m[1], m[2]}] = true
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no manifest of %s-%d under s3://%s/%s", topic, partition, st.Bucket(), listPrefix)
	}
	locs := make([]loc, 0, len(found))
	for l := range found {
		locs = append(locs, l)
	}
	sort.Slice(locs, func(i, j int) bool { return locs[i].cluster+locs[i].id < locs[j].cluster+locs[j].id })
	var reps []tierReport
	for _, l := range locs {
		p := tier.New(st, tier.Config{Cluster: l.cluster}, logr.Discard()).Partition(topic, l.id, partition)
		m, err := p.Load(ctx)
		if err != nil {
			return nil, err
		}
		rep := tierReport{Prefix: p.Prefix(), Manifest: m}
		if verify {
			rep.Verified = map[string]string{}
			for _, s := range m.Segments {
				status := "ok"
				if err := p.VerifySegment(ctx, s); err != nil {
					status = err.Error()
					rep.BadSegments++
				}
				rep.Verified[s.Key] = status
			}
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

func printTierReport(w io.Writer, r tierReport) {
	m := r.Manifest
	fmt.Fprintf(w, "%s\n", r.Prefix)
	fmt.Fprintf(w, "  manifest  epoch %d seq %d, offsets [%d, %d), %d segments, %d bytes\n", m.LeaderEpoch, m.Seq, m.StartOffset, m.EndOffset, len(m.Segments), m.Size())
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  BASE\tLAST\tEPOCH\tBYTES\tCRC\tABORTED TXNS\tMAX TIMESTAMP\tKEY\tSTATUS")
	for _, s := range m.Segments {
		ts := "-"
		if s.MaxTimestamp >= 0 {
			ts = time.UnixMilli(s.MaxTimestamp).UTC().Format(time.RFC3339Nano)
		}
		status := ""
		if r.Verified != nil {
			status = r.Verified[s.Key]
		}
		// Entries of the segment's .txnindex (34 bytes each).
		aborted := s.TxnIndexSize / 34
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%08x\t%d\t%s\t%s\t%s\n", s.BaseOffset, s.LastOffset, s.LeaderEpoch, s.Size, s.CRC, aborted, ts, s.Key, status)
	}
	tw.Flush()
}
