// Package objstore is the broker's view of an object store: a small Store
// interface (Put, ranged Get, Head, Delete, List by prefix) bound to one
// bucket, an S3 implementation on aws-sdk-go-v2, and a fault-injecting
// wrapper for benchmarks and fault tests.
//
// # S3
//
// NewS3 builds a client from Config: region, an optional custom endpoint
// with path-style addressing for S3-compatible servers (MinIO, Versity
// Gateway, Ceph), and the retry policy of the SDK's standard retryer
// (MaxAttempts, exponential backoff with jitter capped at MaxBackoff).
// Every call is bounded twice: AttemptTimeout caps one HTTP attempt,
// reading its response body included (a context deadline set by a
// middleware inside the SDK's retry loop; the attempt it cuts is retried
// like a timeout, AttemptTimeoutError), CallTimeout caps the whole call
// including retries (a context deadline), so a dead endpoint fails a call
// in bounded time instead of hanging the uploader. It is not the HTTP
// client's Timeout: the SDK wraps its transport in a type net/http does
// not know, for which a client timeout costs a goroutine, a timer and two
// channels per request.
//
// Stores with Config.OwnChecksums (the WAL's, whose objects carry
// CRC-32Cs) take a leaner request path: besides skipping the SDK's
// checksums, PutObject sends UNSIGNED-PAYLOAD instead of hashing the body
// over plain http (over https the SDK already does), and the per-request
// telemetry middlewares of the Build step (invocation ID, the SDK's
// User-Agent and its checksum feature flags) are removed by ID. Retries,
// signing, endpoint resolution, S3 Express session auth and clock skew
// correction are the SDK's, unchanged.
//
// S3 Express One Zone directory buckets (names ending in "--x-s3", e.g.
// "strata-wal--use1-az6--x-s3") need no special code: for such a bucket
// name and no custom endpoint, the SDK resolves the zonal endpoint
// (https://<bucket>.s3express-<az-id>.<region>.amazonaws.com), calls
// CreateSession on first use, caches the session credentials and signs
// with them (auth scheme sigv4-s3express). Config.Type = TypeS3Express only
// checks that the bucket name is a directory bucket name and that
// path-style is off, which directory buckets reject.
//
// # Credentials
//
// In order of precedence: Config.Credentials (a static pair); the files of
// a mounted Secret (Config.CredentialsDir, files accessKeyID,
// secretAccessKey and optional sessionToken — the operator's default Secret
// keys — re-read on every refresh so a rotated Secret is picked up); the
// environment variables <EnvPrefix>_ACCESS_KEY_ID,
// <EnvPrefix>_SECRET_ACCESS_KEY, <EnvPrefix>_SESSION_TOKEN (EnvPrefix
// "STRATA_WAL" or "STRATA_TIER", as the operator sets them from the
// Secret); and last the SDK's default chain (AWS_* variables, shared config,
// web identity / IRSA / EKS Pod Identity, instance role).
//
// # Metrics
//
// Every S3 call (and every wrapper call) is reported to an Observer with
// its operation, bucket, zone, payload bytes and error. PrometheusObserver
// turns that into strata_objstore_requests_total{bucket,zone,op,result} and
// strata_objstore_bytes_total{bucket,zone,op}; the broker registers it on
// its registry.
//
// Missing objects are reported as ErrNotFound (errors.Is).
package objstore
