package s3server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// helperEnv, set to a directory, makes the test binary a process that
// starts a gateway there, prints its PID and waits to be killed
// (TestGatewayDiesWithKilledParent).
const helperEnv = "STRATA_S3SERVER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		srv := s3server.Start(helperTB{}, "wal-a")
		fmt.Println(srv.Pid())
		// Nothing else to do until killed; not synchronisation.
		time.Sleep(time.Hour)
		os.Exit(3)
	}
	goleak.VerifyTestMain(m)
}

// helperTB is s3server.TB outside a test: failures end the process.
type helperTB struct{}

func (helperTB) Helper()             {}
func (helperTB) Logf(string, ...any) {}
func (helperTB) Cleanup(func())      {}
func (helperTB) TempDir() string {
	dir, err := os.MkdirTemp(os.Getenv(helperEnv), "gateway-")
	if err != nil {
		helperTB{}.Fatalf("%v", err)
	}
	return dir
}
func (helperTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func TestPutGetAcrossRestart(t *testing.T) {
	srv := s3server.Start(t, "wal-a", "wal-b")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := srv.Client()

	out, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	if len(names) != 2 || names[0] != "wal-a" || names[1] != "wal-b" {
		t.Fatalf("buckets = %v, want [wal-a wal-b]", names)
	}

	payload := []byte("strata wal object")
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("wal-a"), Key: aws.String("wal/c/z/1/0/00000000000000000001"),
		Body: bytes.NewReader(payload),
	}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}

	srv.Stop()
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("wal-a")}); err == nil {
		t.Fatal("HeadBucket succeeded against a stopped server")
	}
	srv.Stop() // idempotent

	srv.Restart()
	got, err := client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String("wal-a"), Key: aws.String("wal/c/z/1/0/00000000000000000001"),
	})
	if err != nil {
		t.Fatalf("GetObject after restart: %v", err)
	}
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil || !bytes.Equal(body, payload) {
		t.Fatalf("GetObject after restart = %q, %v; want %q", body, err, payload)
	}
}

func TestWrongSecretIsRejected(t *testing.T) {
	srv := s3server.Start(t, "wal-a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := s3.New(s3.Options{
		Region:       srv.Region,
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, "not-the-secret", ""),
		Retryer:      aws.NopRetryer{},
	})
	_, err := bad.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("wal-a")})
	if err == nil {
		t.Fatal("HeadBucket with a wrong secret succeeded")
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
		t.Fatalf("HeadBucket with a wrong secret: %v, want HTTP 403", err)
	}
}

func TestBinaryMissingExplainsWhatToRun(t *testing.T) {
	t.Setenv(s3server.EnvBinary, "")
	_, err := s3server.Binary()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("make test")) {
		t.Fatalf("Binary() error = %v, want one mentioning `make test`", err)
	}
}
