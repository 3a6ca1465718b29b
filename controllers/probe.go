package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Reasons of a FastBucket's Reachable condition.
const (
	ReasonProbeSucceeded      = "ProbeSucceeded"
	ReasonSecretNotFound      = "SecretNotFound"
	ReasonSecretKeyMissing    = "SecretKeyMissing"
	ReasonEndpointUnreachable = "EndpointUnreachable"
	ReasonAccessDenied        = "AccessDenied"
	ReasonBucketNotFound      = "BucketNotFound"
	ReasonProbeTimeout        = "ProbeTimeout"
	ReasonProbeMismatch       = "ProbeObjectMismatch"
	ReasonProbeFailed         = "ProbeFailed"
)

// ProbeKey is the object the probe writes, reads back and deletes.
const ProbeKey = ".strata/probe"

// StaticCredentials is an access key pair read from a Secret.
type StaticCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// ProbeError is a failed probe with the condition reason it maps to.
type ProbeError struct {
	Reason string
	Step   string
	Err    error
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// ProbeBucket checks that a bucket answers through the S3 API and that
// the credentials may write, read and delete in it: HeadBucket, then a put,
// get and delete of a small probe object. creds nil means ambient
// credentials. It returns how long the four calls took. Each call is tried
// once: a probe reports the bucket's state, retrying would hide it.
func ProbeBucket(ctx context.Context, spec strata.FastBucketSpec, creds *StaticCredentials) (time.Duration, error) {
	client, err := newS3Client(ctx, spec, creds)
	if err != nil {
		return 0, &ProbeError{Reason: ReasonProbeFailed, Step: "configure S3 client", Err: err}
	}
	bucket := aws.String(spec.Bucket)
	payload := []byte("strata fast-bucket probe")

	start := time.Now()
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket}); err != nil {
		return 0, classify("HeadBucket", err)
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(ProbeKey), Body: bytes.NewReader(payload)}); err != nil {
		return 0, classify("PutObject", err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(ProbeKey)})
	if err != nil {
		return 0, classify("GetObject", err)
	}
	got, err := io.ReadAll(io.LimitReader(out.Body, int64(len(payload))+1))
	out.Body.Close()
	if err != nil {
		return 0, classify("GetObject", err)
	}
	if !bytes.Equal(got, payload) {
		return 0, &ProbeError{Reason: ReasonProbeMismatch, Step: "GetObject", Err: fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(payload))}
	}
	if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(ProbeKey)}); err != nil {
		return 0, classify("DeleteObject", err)
	}
	return time.Since(start), nil
}

func newS3Client(ctx context.Context, spec strata.FastBucketSpec, creds *StaticCredentials) (*s3.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(spec.Region),
		config.WithRetryMaxAttempts(1),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.DisableKeepAlives = true // one probe per interval; no idle connections left behind
		})),
	}
	if creds != nil {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if spec.Endpoint != "" {
			o.BaseEndpoint = aws.String(spec.Endpoint)
		}
		o.UsePathStyle = spec.ForcePathStyle
	}), nil
}

// classify maps an S3 error to a condition reason.
func classify(step string, err error) *ProbeError {
	pe := &ProbeError{Reason: ReasonProbeFailed, Step: step, Err: err}
	var apiErr smithy.APIError
	var respErr *awshttp.ResponseError
	var netErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		pe.Reason = ReasonProbeTimeout
	case errors.As(err, &respErr) && (respErr.HTTPStatusCode() == http.StatusForbidden || respErr.HTTPStatusCode() == http.StatusUnauthorized):
		pe.Reason = ReasonAccessDenied
		pe.Err = fmt.Errorf("the credentials were rejected (HTTP %d %s)", respErr.HTTPStatusCode(), apiCode(err))
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusNotFound && step == "HeadBucket":
		pe.Reason = ReasonBucketNotFound
		pe.Err = fmt.Errorf("the bucket does not exist (HTTP 404 %s)", apiCode(err))
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NoSuchBucket"):
		pe.Reason = ReasonBucketNotFound
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidAccessKeyId" || apiErr.ErrorCode() == "SignatureDoesNotMatch" || apiErr.ErrorCode() == "AccessDenied"):
		pe.Reason = ReasonAccessDenied
	case errors.As(err, &dnsErr), errors.As(err, &netErr):
		pe.Reason = ReasonEndpointUnreachable
	}
	return pe
}

func apiCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
