// Package pki is the operator's small certificate authority: a cluster CA
// (ECDSA P-256), leaf certificates it signs for brokers, etcd members and
// the operator's own clients, PEM encoding, and the decision when a
// certificate must be renewed. It uses crypto/x509 only and holds no
// state: callers keep the PEM in Kubernetes Secrets (controllers) or in
// files (internal/devcerts for `strata dev --security` and tests).
//
// Renewal follows the model of Strimzi's cluster CA without its phasing:
// a certificate is renewed when less than RenewBefore (default 30 days) or
// RenewFraction of its validity is left, or when it no longer names the
// hosts it must. A CA is renewed with the same key (RenewCA), so every
// leaf signed under the old CA certificate still verifies against the new
// one, and the trust bundle (TrustBundle) carries the old CA certificate
// too until it expires: peers that still hold only the old bundle keep
// accepting leaves issued under the new certificate, and peers with the
// new bundle accept leaves issued under the old one.
package pki
