package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"software.sslmate.com/src/go-pkcs12"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/pki"
)

// UserCertSubject is the subject of a tls KafkaUser's certificate: CN is
// the user's name and nothing else, so its principal under the brokers'
// DEFAULT mapping is User:CN=<name>. It cannot equal the principal of a
// SCRAM user (KafkaUser names have no '=') nor of the cluster CA's
// certificates (those carry O=strata), and the clients CA that signs it
// is trusted on client listeners only, never on REPLICATION.
func UserCertSubject(name string) pkix.Name { return pkix.Name{CommonName: name} }

// reconcileCertificate keeps a client certificate of the cluster's
// clients CA for a tls user in its Secret (ca.crt: the clients CA trust
// bundle; user.crt, user.key; user.p12 and user.password, the same as a
// PKCS#12 keystore: userKeystore), issued on first use and again when it is
// due for renewal (the cluster's spec.security.clusterCA renewal policy),
// no longer signed by the clients CA or not the user's subject. The
// resync (DefaultUserResync) notices renewals; clients re-read the files
// or restart to use the new certificate, the old one stays valid until
// it expires.
func (r *KafkaUserReconciler) reconcileCertificate(ctx context.Context, s *userScope) error {
	ku, kc := s.user, s.cluster
	caName := ClientsCASecretName(kc.Name)
	caSec := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: caName}, caSec)
	if apierrors.IsNotFound(err) {
		return &topicStop{reason: ReasonClientsCANotReady, retry: true,
			message: fmt.Sprintf("the clients CA of KafkaCluster %s (Secret %s) is not issued yet", kc.Name, caName)}
	}
	if err != nil {
		return fmt.Errorf("get Secret %s: %w", caName, err)
	}
	ca, err := pki.ParseKeyPair(caSec.Data[TLSCertKey], caSec.Data[TLSKeyKey])
	if err != nil {
		return &topicStop{reason: ReasonClientsCANotReady, retry: true, message: fmt.Sprintf("Secret %s: %v", caName, err)}
	}
	sec, err := r.userSecret(ctx, ku)
	if err != nil {
		return err
	}
	now := time.Now()
	subject := UserCertSubject(ku.Name)
	reason := "new"
	var leaf *pki.KeyPair
	if sec != nil {
		if leaf, err = pki.ParseKeyPair(sec.Data[UserSecretCert], sec.Data[UserSecretKey]); err != nil {
			reason = err.Error()
		} else if leaf.Cert.Subject.String() != subject.String() {
			reason = fmt.Sprintf("subject %s is not %s", leaf.Cert.Subject, subject)
		} else {
			reason = pki.Reason(leaf.Cert, ca.Cert, nil, renewPolicy(kc), now)
		}
	}
	if reason != "" {
		if leaf, err = ca.Issue(pki.LeafOptions{Subject: subject, Client: true}, now); err != nil {
			return fmt.Errorf("issue the certificate of user %s: %w", ku.Name, err)
		}
		log.FromContext(ctx).Info("issued user certificate", "reason", reason, "notAfter", leaf.Cert.NotAfter)
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventUserCertificateIssued, "Update",
			"issued the certificate of %s from the clients CA (%s), valid until %s", tlsUserPrincipal(ku.Name), reason, leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	p12, p12Password, err := userKeystore(sec, leaf, ca.Cert)
	if err != nil {
		return fmt.Errorf("keystore of user %s: %w", ku.Name, err)
	}
	data := map[string][]byte{
		UserSecretCACert:      caSec.Data[CACertKey],
		UserSecretCert:        leaf.CertPEM,
		UserSecretKey:         leaf.KeyPEM,
		UserSecretP12:         p12,
		UserSecretP12Password: p12Password,
	}
	_, err = r.writeUserSecret(ctx, ku, sec, data)
	return err
}

// userKeystore returns user.p12 and user.password for leaf, issued by
// ca. The stored ones are kept while they hold leaf and ca: an encoding
// is salted, so encoding at every reconcile would rewrite the Secret at
// every resync. A new keystore (a new certificate, or a renewed CA) keeps
// the stored password, so clients configured with it need no change;
// the first one gets a random password (128 bits, as SCRAM users').
// Modern2023 is AES-256-CBC with PBKDF2-HMAC-SHA-256, which Java reads
// since 8u301 and 11.0.12.
func userKeystore(stored *corev1.Secret, leaf *pki.KeyPair, ca *x509.Certificate) (p12, password []byte, err error) {
	if stored != nil {
		p12, password = stored.Data[UserSecretP12], stored.Data[UserSecretP12Password]
		if len(p12) > 0 && len(password) > 0 {
			_, cert, chain, err := pkcs12.DecodeChain(p12, string(password))
			if err == nil && cert.Equal(leaf.Cert) && len(chain) == 1 && chain[0].Equal(ca) {
				return p12, password, nil
			}
		}
	}
	if len(password) == 0 {
		password = []byte(rand.Text())
	}
	p12, err = pkcs12.Modern2023.Encode(leaf.Key, leaf.Cert, []*x509.Certificate{ca}, string(password))
	if err != nil {
		return nil, nil, fmt.Errorf("encode PKCS#12: %w", err)
	}
	return p12, password, nil
}

// reconcileTLSCredentials: a tls user has no SCRAM credential. A user
// that was a SCRAM user before (status.mechanism) loses that credential
// and the ACLs of its SCRAM principal, which the KafkaUser managed.
func (r *KafkaUserReconciler) reconcileTLSCredentials(ctx context.Context, s *userScope) error {
	ku := s.user
	if m := ku.Status.Mechanism; m != "" && m != MechanismTLS {
		if err := r.dropPrincipal(ctx, s, scramUserPrincipal(ku.Name)); err != nil {
			return err
		}
		current, err := describeScram(ctx, s.adm, ku.Name)
		if err != nil {
			return err
		}
		var del []kadm.DeleteSCRAM
		for mech := range current {
			del = append(del, kadm.DeleteSCRAM{User: ku.Name, Mechanism: mech})
		}
		if len(del) > 0 {
			res, err := s.adm.AlterUserSCRAMs(ctx, del, nil)
			if err == nil {
				if one, ok := res[ku.Name]; ok && !errors.Is(one.Err, kerr.ResourceNotFound) {
					err = withMessage(one.Err, one.ErrMessage)
				}
			}
			if err != nil {
				return fmt.Errorf("delete SCRAM credentials of user %s: %w", ku.Name, err)
			}
			r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventCredentialsDeleted, "Update",
				"deleted the SCRAM credentials of user %s (spec.authentication.type is tls)", ku.Name)
		}
	}
	ku.Status.Mechanism = MechanismTLS
	return nil
}

// dropPrincipal deletes every ACL of principal, the KafkaUser's former
// principal after its authentication type changed. Brokers without an
// authorizer hold none.
func (r *KafkaUserReconciler) dropPrincipal(ctx context.Context, s *userScope, principal string) error {
	if err := aclAPIsServed(ctx, s.adm); err != nil {
		if errors.Is(err, errAclsNotSupported) {
			return nil
		}
		return err
	}
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow(principal).AllowHosts().Deny(principal).DenyHosts()
	res, err := s.adm.DeleteACLs(ctx, b)
	var deleted []string
	for _, one := range res {
		if errors.Is(one.Err, kerr.SecurityDisabled) {
			continue
		}
		err = cmp.Or(err, withMessage(one.Err, one.ErrMessage))
		for _, d := range one.Deleted {
			deleted = append(deleted, fmt.Sprintf("%s %s on %s", d.Permission, d.Operation, d.Name))
		}
	}
	if err != nil {
		return fmt.Errorf("delete ACLs of former principal %s: %w", principal, err)
	}
	if len(deleted) > 0 {
		r.Recorder.Eventf(s.user, nil, corev1.EventTypeNormal, EventAclsDeleted, "Update",
			"deleted the ACLs of %s, the user's principal before its authentication type changed: %s", principal, strings.Join(deleted, ", "))
	}
	return nil
}

// checkClientCertificateListener stops a tls user at Ready=False while no
// listener of its cluster lets it log in with its certificate: an SSL
// listener with tls.clientAuth requested or required. A SASL_SSL
// listener may ask for a certificate too, but its principal is the SASL
// user's, and a tls user has no SASL credential.
func checkClientCertificateListener(_ context.Context, s *userScope) error {
	if slices.ContainsFunc(Listeners(s.cluster), acceptsUserCertificates) {
		return nil
	}
	return &topicStop{reason: ReasonNoClientCertificateListener,
		message: fmt.Sprintf("no listener of KafkaCluster %s accepts client certificates, so user %s cannot log in with the certificate in Secret %s: "+
			"add a listener with protocol SSL and tls.clientAuth required (or requested) to the cluster's spec.listeners", s.cluster.Name, tlsUserPrincipal(s.user.Name), s.user.Name)}
}

// acceptsUserCertificates: a client on l authenticates with its
// certificate alone.
func acceptsUserCertificates(l strata.ListenerSpec) bool {
	return l.Protocol == "SSL" && l.TLS != nil &&
		(l.TLS.ClientAuth == strata.ClientAuthRequired || l.TLS.ClientAuth == strata.ClientAuthRequested)
}
