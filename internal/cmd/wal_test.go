package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func walTestObject(t *testing.T) []byte {
	t.Helper()
	var chunks []wal.ChunkInput
	for p := int32(0); p < 2; p++ {
		spec := record.DefaultSpec()
		spec.BaseOffset = 10 * int64(p)
		spec.PartitionLeaderEpoch = 3
		b, err := record.Build(spec, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, wal.ChunkInput{Topic: "orders", Partition: p, LeaderEpoch: 3, BaseOffset: spec.BaseOffset, LastOffset: spec.BaseOffset + 1, Batches: [][]byte{b}})
	}
	obj, _, err := wal.Encode(wal.Header{Version: wal.Version, Cluster: "demo", Zone: "zone-a", BrokerID: 101, Incarnation: 4, Sequence: 17, CreatedAt: time.UnixMilli(1_750_000_000_000)}, chunks)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func runStrata(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestWALInspectFile(t *testing.T) {
	dir := t.TempDir()
	obj := walTestObject(t)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, obj, 0o644)

	out, err := runStrata(t, "wal", "inspect", good)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"cluster      demo", "zone         zone-a", "broker       101", "sequence     17", "chunks       2", "orders", "ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = runStrata(t, "wal", "inspect", "--json", good)
	if err != nil {
		t.Fatal(err)
	}
	var rep walReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if rep.Header.BrokerID != 101 || len(rep.Chunks) != 2 || rep.Chunks[1].BaseOffset != 10 || rep.Chunks[1].Batches != 1 || rep.Chunks[1].Status != "ok" || rep.CorruptChunks != 0 {
		t.Fatalf("report = %+v", rep)
	}

	bad := bytes.Clone(obj)
	bad[len(bad)-3] ^= 0x01 // inside the last chunk
	badPath := filepath.Join(dir, "bad")
	os.WriteFile(badPath, bad, 0o644)
	out, err = runStrata(t, "wal", "inspect", badPath)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 chunks are corrupt") || !strings.Contains(out, "chunk CRC mismatch") {
		t.Fatalf("inspect of a corrupt chunk = %v\n%s", err, out)
	}

	// A shared object: forwarded records after the chunks.
	h, chunks, err := wal.DecodeTable(obj, int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	inputs := make([]wal.ChunkInput, len(chunks))
	for i, c := range chunks {
		inputs[i] = wal.ChunkInput{Topic: c.Topic, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset, Batches: [][]byte{obj[c.Offset:c.End()]}}
	}
	shared, _, _, err := wal.EncodeWithTail(h, inputs, [][]byte{[]byte("forwarded"), []byte("records")})
	if err != nil {
		t.Fatal(err)
	}
	sharedPath := filepath.Join(dir, "shared")
	os.WriteFile(sharedPath, shared, 0o644)
	out, err = runStrata(t, "wal", "inspect", sharedPath)
	if err != nil || !strings.Contains(out, "after chunks  16 bytes") || strings.Count(out, " ok") != 2 {
		t.Fatalf("inspect of a shared object = %v\n%s", err, out)
	}

	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("definitely not a WAL object, but long enough to hold a header"), 0o644)
	if _, err := runStrata(t, "wal", "inspect", junk); err == nil || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("inspect of junk = %v", err)
	}
	if _, err := runStrata(t, "wal", "inspect", filepath.Join(dir, "missing")); err == nil {
		t.Fatal("inspect of a missing file succeeded")
	}
}

func TestWALInspectS3(t *testing.T) {
	srv := s3server.Start(t, "wal-zone-a")
	key := wal.ObjectKey("demo", "zone-a", 101, 4, 17)
	if _, err := srv.Client().PutObject(context.Background(), putInput("wal-zone-a", key, walTestObject(t))); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))

	for _, args := range [][]string{{}, {"--table-only"}} {
		out, err := runStrata(t, append([]string{"wal", "inspect", "--json", "s3://wal-zone-a/" + key}, args...)...)
		if err != nil {
			t.Fatalf("inspect %v: %v\n%s", args, err, out)
		}
		var rep walReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("JSON: %v\n%s", err, out)
		}
		wantStatus := "ok"
		if len(args) > 0 {
			wantStatus = "unverified"
		}
		if rep.Header.Sequence != 17 || len(rep.Chunks) != 2 || rep.Chunks[0].Status != wantStatus {
			t.Fatalf("inspect %v: report = %+v", args, rep)
		}
	}
	if _, err := runStrata(t, "wal", "inspect", "s3://wal-zone-a/wal/none"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("inspect of a missing key = %v", err)
	}
	if _, err := runStrata(t, "wal", "inspect", "s3://wal-zone-a"); err == nil {
		t.Fatal("inspect of a bucket without key succeeded")
	}
}

func putInput(bucket, key string, data []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}
}
