package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// retryableConflicts are error codes retried besides the SDK's own.
var retryableConflicts = []string{"ExistingObjectIsDirectory"}

// Bucket types, as in FastBucket.spec.type.
const (
	TypeS3        = "S3"
	TypeS3Express = "S3Express"
)

// DirectoryBucketSuffix ends every S3 Express One Zone directory bucket name.
const DirectoryBucketSuffix = "--x-s3"

// Defaults of Config.
const (
	DefaultMaxAttempts    = 3
	DefaultMaxBackoff     = 200 * time.Millisecond
	DefaultAttemptTimeout = 5 * time.Second
	DefaultCallTimeout    = 15 * time.Second
)

// Files of a mounted credentials Secret (the operator's default key names).
const (
	FileAccessKeyID     = "accessKeyID"
	FileSecretAccessKey = "secretAccessKey"
	FileSessionToken    = "sessionToken"
)

// Config configures an S3 Store.
type Config struct {
	Bucket string
	Region string
	// Zone labels metrics; it is not sent to S3.
	Zone string
	// Type is TypeS3 (default) or TypeS3Express.
	Type string
	// Endpoint overrides the service endpoint (S3-compatible servers).
	Endpoint string
	// ForcePathStyle addresses buckets as /<bucket>/<key>.
	ForcePathStyle bool
	// OwnChecksums: the caller verifies what it reads with its own CRCs
	// (WAL objects: a CRC-32C over the header, the chunk table and every
	// chunk), so the SDK computes a request checksum and validates a
	// response checksum only where the operation requires one. Each
	// costs a CRC pass over the body and the SDK's checksum middleware on
	// every PUT and GET. Off (the SDK's default, "when supported") for
	// stores whose readers rely on the SDK, e.g. the tier's manifests.
	OwnChecksums bool

	// Credentials, when set, is used as is.
	Credentials *StaticCredentials
	// CredentialsDir is a mounted Secret holding the files accessKeyID,
	// secretAccessKey and optionally sessionToken.
	CredentialsDir string
	// EnvPrefix names the variables <prefix>_ACCESS_KEY_ID,
	// <prefix>_SECRET_ACCESS_KEY and <prefix>_SESSION_TOKEN, e.g.
	// "STRATA_WAL". Used when they are set.
	EnvPrefix string

	// MaxAttempts per call, first attempt included (default 3; 1 = no retry).
	MaxAttempts int
	// MaxBackoff caps the jittered exponential delay between attempts.
	MaxBackoff time.Duration
	// AttemptTimeout bounds one HTTP attempt.
	AttemptTimeout time.Duration
	// CallTimeout bounds a whole call, retries included.
	CallTimeout time.Duration

	// Observer is told about every call (nil: none).
	Observer Observer
	// HTTPClient replaces the SDK's HTTP client (tests).
	HTTPClient aws.HTTPClient
}

// StaticCredentials is an access key pair.
type StaticCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

func (c *Config) setDefaults() {
	if c.Type == "" {
		c.Type = TypeS3
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
}

// Validate checks the configuration without network access.
func (c Config) Validate() error {
	if c.Bucket == "" {
		return errors.New("objstore: bucket is required")
	}
	if c.Region == "" {
		return errors.New("objstore: region is required")
	}
	switch c.Type {
	case "", TypeS3:
	case TypeS3Express:
		if !strings.HasSuffix(c.Bucket, DirectoryBucketSuffix) {
			return fmt.Errorf("objstore: bucket %q is of type %s but not a directory bucket name (…--<az-id>%s)", c.Bucket, TypeS3Express, DirectoryBucketSuffix)
		}
		if c.ForcePathStyle {
			return fmt.Errorf("objstore: S3 Express directory bucket %q does not support path-style addressing", c.Bucket)
		}
	default:
		return fmt.Errorf("objstore: unknown bucket type %q (want %s or %s)", c.Type, TypeS3, TypeS3Express)
	}
	return nil
}

// S3 is a Store on one S3 bucket.
type S3 struct {
	client *s3.Client
	cfg    Config

	mu         sync.Mutex
	transports []*http.Transport
}

var _ Store = (*S3)(nil)

// NewS3 builds an S3 store. It does not contact the endpoint.
func NewS3(ctx context.Context, cfg Config) (*S3, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	httpClient := cfg.HTTPClient
	st := &S3{cfg: cfg}
	if httpClient == nil {
		// The SDK builds the transport lazily (adding e.g. AWS_CA_BUNDLE);
		// remember it so that Close can release its idle connections.
		// No client Timeout: attemptTimeout bounds each attempt.
		httpClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			st.mu.Lock()
			st.transports = append(st.transports, t)
			st.mu.Unlock()
		})
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(cfg.Region),
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			r := retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = cfg.MaxBackoff
				o.Backoff = retry.NewExponentialJitterBackoff(cfg.MaxBackoff)
			})
			// S3-compatible servers that keep objects as files (Versity
			// Gateway's posix backend, MinIO in FS mode) remove a key's
			// empty parent directories on delete; a PUT under the same
			// prefix racing that removal gets 409 ExistingObjectIsDirectory.
			// PUT is idempotent, so it is retried like a throttle.
			return retry.AddWithErrorCodes(r, retryableConflicts...)
		}),
	}
	if p, err := credentialsProvider(cfg); err != nil {
		return nil, err
	} else if p != nil {
		opts = append(opts, config.WithCredentialsProvider(p))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: load AWS config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
		// Ranged GETs carry no whole-object checksum; do not log that.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Deserialize.Add(&attemptTimeout{d: cfg.AttemptTimeout}, middleware.After)
		})
		if cfg.OwnChecksums {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			o.APIOptions = append(o.APIOptions, leanStack)
		}
	})
	st.client = client
	return st, nil
}

// Close releases idle connections. The store stays usable.
func (s *S3) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.transports {
		t.CloseIdleConnections()
	}
}

// credentialsProvider picks the credentials source; nil means the SDK's
// default chain.
func credentialsProvider(cfg Config) (aws.CredentialsProvider, error) {
	switch {
	case cfg.Credentials != nil:
		c := cfg.Credentials
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return nil, errors.New("objstore: static credentials need an access key id and a secret access key")
		}
		return credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken), nil
	case cfg.CredentialsDir != "":
		p := fileCredentials{dir: cfg.CredentialsDir}
		if _, err := p.read(); err != nil { // fail at start, not on the first PUT
			return nil, err
		}
		return aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = 0 }), nil
	case cfg.EnvPrefix != "":
		id, secret := os.Getenv(cfg.EnvPrefix+"_ACCESS_KEY_ID"), os.Getenv(cfg.EnvPrefix+"_SECRET_ACCESS_KEY")
		switch {
		case id == "" && secret == "":
			return nil, nil // ambient credentials
		case id == "" || secret == "":
			return nil, fmt.Errorf("objstore: %s_ACCESS_KEY_ID and %s_SECRET_ACCESS_KEY must be set together", cfg.EnvPrefix, cfg.EnvPrefix)
		}
		return credentials.NewStaticCredentialsProvider(id, secret, os.Getenv(cfg.EnvPrefix+"_SESSION_TOKEN")), nil
	}
	return nil, nil
}

// fileCredentials reads a key pair from a mounted Secret. Kubernetes
// updates mounted Secrets in place; credentials expire after a minute so a
// rotation is seen without a restart.
type fileCredentials struct{ dir string }

func (f fileCredentials) read() (aws.Credentials, error) {
	get := func(name string, required bool) (string, error) {
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			if !required && errors.Is(err, os.ErrNotExist) {
				return "", nil
			}
			return "", fmt.Errorf("objstore: read credentials file: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" && required {
			return "", fmt.Errorf("objstore: credentials file %s is empty", filepath.Join(f.dir, name))
		}
		return v, nil
	}
	id, err := get(FileAccessKeyID, true)
	if err != nil {
		return aws.Credentials{}, err
	}
	secret, err := get(FileSecretAccessKey, true)
	if err != nil {
		return aws.Credentials{}, err
	}
	token, err := get(FileSessionToken, false)
	if err != nil {
		return aws.Credentials{}, err
	}
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token, Source: "strata-secret-files"}, nil
}

func (f fileCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	c, err := f.read()
	if err != nil {
		return c, err
	}
	c.CanExpire = true
	c.Expires = time.Now().Add(time.Minute)
	return c, nil
}

// Bucket implements Store.
func (s *S3) Bucket() string { return s.cfg.Bucket }

// Client returns the underlying SDK client.
func (s *S3) Client() *s3.Client { return s.client }

func (s *S3) observe(op Op, start time.Time, n int64, err error) {
	s.cfg.Observer.ObserveCall(op, s.cfg.Bucket, s.cfg.Zone, n, time.Since(start), err)
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, data []byte) (err error) {
	start := time.Now()
	defer func() { s.observe(OpPut, start, int64(len(data)), err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	return s.wrap("put", key, err)
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string, offset, length int64) (data []byte, err error) {
	start := time.Now()
	defer func() { s.observe(OpGet, start, int64(len(data)), err) }()
	if offset < 0 || length == 0 {
		return nil, fmt.Errorf("objstore: get %s: invalid range offset %d length %d", key, offset, length)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	defer out.Body.Close()
	size := int64(0)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	// One copy into a buffer of the announced size: net/http's body
	// returns io.EOF with its last bytes, so the buffer never grows.
	buf := bytes.NewBuffer(make([]byte, 0, max(size, 0)))
	if _, err := io.Copy(buf, out.Body); err != nil {
		return nil, s.wrap("get", key, err)
	}
	return buf.Bytes(), nil
}

// Head implements Store.
func (s *S3) Head(ctx context.Context, key string) (info ObjectInfo, err error) {
	start := time.Now()
	defer func() { s.observe(OpHead, start, 0, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return ObjectInfo{}, s.wrap("head", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) (err error) {
	start := time.Now()
	defer func() { s.observe(OpDelete, start, 0, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)})
	if err = s.wrap("delete", key, err); errors.Is(err, ErrNotFound) && !isBucketMissing(err) {
		return nil
	}
	return err
}

// DeleteMany implements BatchDeleter with one DeleteObjects request
// (quiet mode: the answer lists only the keys that failed).
func (s *S3) DeleteMany(ctx context.Context, keys []string) (err error) {
	if len(keys) == 0 {
		return nil
	}
	if len(keys) > MaxDeleteBatch {
		return fmt.Errorf("objstore: delete %d objects in one request: at most %d", len(keys), MaxDeleteBatch)
	}
	start := time.Now()
	defer func() { s.observe(OpDeleteMany, start, 0, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	ids := make([]s3types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(s.cfg.Bucket),
		Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return s.wrap("delete", fmt.Sprintf("%d objects from %s", len(keys), keys[0]), err)
	}
	var errs []error
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		errs = append(errs, fmt.Errorf("objstore: delete s3://%s/%s: %s: %s", s.cfg.Bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message)))
	}
	return errors.Join(errs...)
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) (objs []ObjectInfo, err error) {
	start := time.Now()
	defer func() { s.observe(OpList, start, 0, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	return objs, nil
}

// wrap adds the operation, bucket and key, and maps "not found" answers to
// ErrNotFound and rejected credentials to a message that says so.
func (s *S3) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	var nsb *s3types.NoSuchBucket
	var apiErr smithy.APIError
	var respErr *awshttp.ResponseError
	switch {
	case errors.As(err, &nsb), errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket":
		return &bucketMissingError{err: fmt.Errorf("objstore: %s s3://%s/%s: bucket does not exist: %w", op, s.cfg.Bucket, key, ErrNotFound)}
	case errors.As(err, &nsk), errors.As(err, &nf):
		return fmt.Errorf("objstore: %s s3://%s/%s: %w", op, s.cfg.Bucket, key, ErrNotFound)
	case errors.As(err, &apiErr) && credentialErrorCodes[apiErr.ErrorCode()]:
		return fmt.Errorf("objstore: %s s3://%s/%s: %w (%s): %w", op, s.cfg.Bucket, key, ErrAccessDenied, apiErr.ErrorCode(), err)
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusNotFound:
		return fmt.Errorf("objstore: %s s3://%s/%s: %w", op, s.cfg.Bucket, key, ErrNotFound)
	case errors.As(err, &respErr) && (respErr.HTTPStatusCode() == http.StatusForbidden || respErr.HTTPStatusCode() == http.StatusUnauthorized):
		return fmt.Errorf("objstore: %s s3://%s/%s: %w (HTTP %d): %w", op, s.cfg.Bucket, key, ErrAccessDenied, respErr.HTTPStatusCode(), err)
	}
	return fmt.Errorf("objstore: %s s3://%s/%s: %w", op, s.cfg.Bucket, key, err)
}

// credentialErrorCodes are the S3 error codes of rejected credentials.
// XAdminUserNotFound is Versity Gateway's answer to an unknown access key
// (with HTTP 404, so it must be tested before "not found").
var credentialErrorCodes = map[string]bool{
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"AccessDenied":          true,
	"InvalidToken":          true,
	"ExpiredToken":          true,
	"XAdminUserNotFound":    true,
}

type bucketMissingError struct{ err error }

func (e *bucketMissingError) Error() string { return e.err.Error() }
func (e *bucketMissingError) Unwrap() error { return e.err }

func isBucketMissing(err error) bool {
	var b *bucketMissingError
	return errors.As(err, &b)
}
