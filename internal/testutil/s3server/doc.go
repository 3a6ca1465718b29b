// Package s3server runs a real S3 API server, Versity Gateway (versitygw)
// with its POSIX backend, for tests that need object storage.
//
// The gateway binary is built by `make s3-server` into bin/ and found
// through the STRATA_VERSITYGW environment variable, which `make test` sets.
// Each Server gets its own temporary directory and a random loopback port,
// and is stopped by the test's Cleanup:
//
//	srv := s3server.Start(t, "wal-zone-a", "wal-zone-b")
//	client := srv.Client()
//	... srv.Stop() / srv.Restart() to inject an outage ...
package s3server
