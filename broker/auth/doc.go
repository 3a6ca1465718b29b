// Package auth holds what the broker needs to authenticate clients,
// independent of the wire protocol: principals ("User:<name>"), the mapping
// of TLS certificate subjects to principals (ssl.principal.mapping.rules),
// SCRAM credentials (RFC 5802/7677, as Kafka stores them: salt, iteration
// count, StoredKey and ServerKey, never the password) with the server side
// of the SCRAM-SHA-256/512 exchange (github.com/xdg-go/scram), and SASL
// PLAIN checked against the same SCRAM credentials.
//
// Credentials live in a CredentialStore: the cluster's etcd in cluster mode
// (broker/meta), a JSON file in the data directory for a standalone broker
// (FileStore). One user database serves both mechanisms: a PLAIN password is
// salted with the stored salt and iterations of the user's SCRAM credential
// and compared with its StoredKey, so no clear-text password file exists.
//
// Authorization (acl.go, authorizer.go): Kafka's ACL model — bindings of
// (resource pattern, principal, host, operation, ALLOW/DENY) — and the
// decision as Kafka's StandardAuthorizer takes it, a pure function
// (Decide) of the bindings, the policy (super.users,
// allow.everyone.if.no.acl.found) and the action. An Authorizer caches the
// bindings of an ACLStore: the cluster's etcd (broker/meta, watched), or a
// FileACLStore (<data dir>/__acls.json) for a standalone broker.
package auth
