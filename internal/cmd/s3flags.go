package cmd

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strata-dev/strata/broker/objstore"
)

// s3Flags are the bucket connection flags of the commands that read a
// bucket (strata wal inspect, strata tier inspect).
type s3Flags struct {
	endpoint       string
	region         string
	pathStyle      bool
	envPrefix      string
	credentialsDir string
	timeout        time.Duration
	// flags is the set they were registered on: --path-style given or
	// not decides the default (store).
	flags *pflag.FlagSet
}

// register adds the flags to fl; envPrefix is the --env-prefix a broker
// pod has for this bucket (STRATA_WAL, STRATA_TIER), shown in the help.
func (f *s3Flags) register(fl *pflag.FlagSet, envPrefix string) {
	f.flags = fl
	fl.StringVar(&f.endpoint, "endpoint", "", "S3 endpoint URL (default $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL)")
	fl.StringVar(&f.region, "region", "", "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION or us-east-1)")
	fl.BoolVar(&f.pathStyle, "path-style", false, "path-style addressing (default on when an endpoint is set)")
	fl.StringVar(&f.envPrefix, "env-prefix", "", "read keys from <prefix>_ACCESS_KEY_ID / <prefix>_SECRET_ACCESS_KEY, e.g. "+envPrefix)
	fl.StringVar(&f.credentialsDir, "credentials-dir", "", "read keys from the files accessKeyID / secretAccessKey in this directory (a mounted Secret)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
}

// store opens bucket with the flags, the AWS_* environment filling in
// what they leave out. Path-style addressing is on with an endpoint
// unless --path-style says otherwise; S3 Express directory buckets
// (objstore.DirectoryBucketSuffix) are always virtual-hosted.
func (f *s3Flags) store(ctx context.Context, bucket string) (*objstore.S3, error) {
	cfg := objstore.Config{
		Bucket:         bucket,
		Region:         firstNonEmpty(f.region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "us-east-1"),
		Endpoint:       firstNonEmpty(f.endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL")),
		ForcePathStyle: f.pathStyle,
		EnvPrefix:      f.envPrefix,
		CredentialsDir: f.credentialsDir,
		CallTimeout:    f.timeout,
	}
	if (f.flags == nil || !f.flags.Changed("path-style")) && cfg.Endpoint != "" {
		cfg.ForcePathStyle = true
	}
	if strings.HasSuffix(bucket, objstore.DirectoryBucketSuffix) {
		cfg.Type = objstore.TypeS3Express
		cfg.ForcePathStyle = false
	}
	return objstore.NewS3(ctx, cfg)
}
