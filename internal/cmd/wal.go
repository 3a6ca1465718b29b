package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/wal"
)

func newWALCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal",
		Short: "Tools for the fast-tier write-ahead log (WAL objects)",
	}
	cmd.AddCommand(newWALInspectCmd())
	return cmd
}

type walInspectFlags struct {
	s3Flags
	json      bool
	tableOnly bool
}

func newWALInspectCmd() *cobra.Command {
	var f walInspectFlags
	cmd := &cobra.Command{
		Use:   "inspect <s3://bucket/key | file>",
		Short: "Print a WAL object's header and chunk table, verifying every chunk",
		Long: `Print the header and chunk table of a WAL object, read from S3 or from a local
file, and verify each chunk (CRC-32C, then every record batch in it). Exits
non-zero when the object or any chunk is corrupt.

For s3:// the endpoint, region and credentials come from the flags or the
environment: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION, and the AWS
SDK's credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles,
web identity), or --env-prefix STRATA_WAL to use STRATA_WAL_ACCESS_KEY_ID /
STRATA_WAL_SECRET_ACCESS_KEY as a broker pod has them, or --credentials-dir
for a mounted Secret. With --table-only only the header and table are read
(two small ranged GETs) and chunks are not verified.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			rep, err := inspectWAL(ctx, args[0], &f)
			if err != nil {
				return err
			}
			if f.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printWALReport(cmd.OutOrStdout(), rep)
			}
			if rep.CorruptChunks > 0 {
				return fmt.Errorf("%d of %d chunks are corrupt", rep.CorruptChunks, len(rep.Chunks))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print JSON instead of text")
	fl.BoolVar(&f.tableOnly, "table-only", false, "read only the header and chunk table; do not verify chunks")
	f.register(fl, "STRATA_WAL")
	return cmd
}

// walReport is what inspect prints.
type walReport struct {
	Source        string        `json:"source"`
	Size          int64         `json:"size,omitempty"`
	Header        walHeaderJSON `json:"header"`
	Chunks        []walChunkRow `json:"chunks"`
	CorruptChunks int           `json:"corruptChunks"`
	// TailBytes are the bytes after the last chunk that the table does
	// not name: zone-local produce's forwarded records, which rode in
	// this broker's object (docs/wal.md "Shared objects").
	TailBytes int64 `json:"tailBytes,omitempty"`
}

type walHeaderJSON struct {
	Version     uint16    `json:"version"`
	Cluster     string    `json:"cluster"`
	Zone        string    `json:"zone"`
	BrokerID    int32     `json:"brokerID"`
	Incarnation uint64    `json:"incarnation"`
	Sequence    uint64    `json:"sequence"`
	CreatedAt   time.Time `json:"createdAt"`
}

type walChunkRow struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	BaseOffset  int64  `json:"baseOffset"`
	LastOffset  int64  `json:"lastOffset"`
	Offset      int64  `json:"byteOffset"`
	Length      int64  `json:"length"`
	CRC         string `json:"crc"`
	Batches     int    `json:"batches,omitempty"`
	// Status is "ok", "unverified" or the chunk's error.
	Status string `json:"status"`
}

func inspectWAL(ctx context.Context, src string, f *walInspectFlags) (*walReport, error) {
	rep := &walReport{Source: src}
	var (
		h      wal.Header
		chunks []wal.ChunkInfo
		data   []byte
		err    error
	)
	if rest, ok := strings.CutPrefix(src, "s3://"); ok {
		bucket, key, ok := strings.Cut(rest, "/")
		if !ok || bucket == "" || key == "" {
			return nil, fmt.Errorf("%q: want s3://<bucket>/<key>", src)
		}
		store, err := f.store(ctx, bucket)
		if err != nil {
			return nil, err
		}
		defer store.Close()
		if f.tableOnly {
			if h, chunks, err = wal.ReadTable(ctx, store, key); err != nil {
				return nil, err
			}
		} else if data, err = store.Get(ctx, key, 0, -1); err != nil {
			return nil, err
		}
	} else if data, err = os.ReadFile(src); err != nil {
		return nil, err
	}

	if data != nil {
		rep.Size = int64(len(data))
		if f.tableOnly {
			h, chunks, err = wal.DecodeTable(data, int64(len(data)))
		} else {
			var obj *wal.Object
			if obj, err = wal.Decode(data); err == nil {
				h = obj.Header
				for _, c := range obj.Chunks {
					chunks = append(chunks, c.ChunkInfo)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
	}
	if data != nil {
		end, _ := wal.HeaderTableSize(data)
		for _, c := range chunks {
			end = max(end, c.End())
		}
		rep.TailBytes = max(int64(len(data))-end, 0)
	}
	rep.Header = walHeaderJSON{Version: h.Version, Cluster: h.Cluster, Zone: h.Zone, BrokerID: h.BrokerID, Incarnation: h.Incarnation, Sequence: h.Sequence, CreatedAt: h.CreatedAt}
	for _, c := range chunks {
		row := walChunkRow{
			Topic: c.Topic, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset,
			Offset: c.Offset, Length: c.Length, CRC: fmt.Sprintf("%08x", c.CRC), Status: "unverified",
		}
		if data != nil && !f.tableOnly {
			chunk := data[c.Offset:c.End()]
			err := c.Verify(chunk)
			if err == nil {
				bs, berr := wal.SplitBatches(c, chunk)
				row.Batches, err = len(bs), berr
			}
			if err != nil {
				row.Status = err.Error()
				rep.CorruptChunks++
			} else {
				row.Status = "ok"
			}
		}
		rep.Chunks = append(rep.Chunks, row)
	}
	return rep, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func printWALReport(w io.Writer, rep *walReport) {
	h := rep.Header
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "object\t%s\n", rep.Source)
	if rep.Size > 0 {
		fmt.Fprintf(tw, "size\t%d bytes\n", rep.Size)
	}
	fmt.Fprintf(tw, "format\tSWAL v%d\n", h.Version)
	fmt.Fprintf(tw, "cluster\t%s\n", h.Cluster)
	fmt.Fprintf(tw, "zone\t%s\n", h.Zone)
	fmt.Fprintf(tw, "broker\t%d\n", h.BrokerID)
	fmt.Fprintf(tw, "incarnation\t%d\n", h.Incarnation)
	fmt.Fprintf(tw, "sequence\t%d\n", h.Sequence)
	fmt.Fprintf(tw, "created\t%s\n", h.CreatedAt.Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "chunks\t%d\n", len(rep.Chunks))
	if rep.TailBytes > 0 {
		fmt.Fprintf(tw, "after chunks\t%d bytes (forwarded records of zone-local produce, not in the table)\n", rep.TailBytes)
	}
	_ = tw.Flush()
	if len(rep.Chunks) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTOPIC\tPARTITION\tEPOCH\tBASE\tLAST\tBYTE OFFSET\tLENGTH\tCRC32C\tBATCHES\tSTATUS")
	for i, c := range rep.Chunks {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", i, c.Topic, c.Partition, c.LeaderEpoch, c.BaseOffset, c.LastOffset, c.Offset, c.Length, c.CRC, c.Batches, c.Status)
	}
	_ = tw.Flush()
}
