package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"software.sslmate.com/src/go-pkcs12"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/pki"
)

// The subjects of the certificates the cluster CA issues. Under the
// brokers' default principal mapping (DEFAULT) a certificate's principal
// is its whole subject: User:CN=strata-broker,O=strata for the brokers,
// User:CN=strata-operator,O=strata for the operator.
var (
	BrokerCertSubject   = pkix.Name{CommonName: "strata-broker", Organization: []string{"strata"}}
	EtcdCertSubject     = pkix.Name{CommonName: "strata-etcd", Organization: []string{"strata"}}
	OperatorCertSubject = pkix.Name{CommonName: "strata-operator", Organization: []string{"strata"}}
)

// Events of the certificate step.
const (
	EventCAIssued             = "ClusterCAIssued"
	EventCARenewed            = "ClusterCARenewed"
	EventCertificateIssued    = "CertificateIssued"
	EventListenerCertProblem  = "ListenerCertificateProblem"
	AnnotationTrustBundleHash = "kafka.strata.dev/trust-bundle-hash"
)

// Names of the certificates in status.certificates.
const (
	CertNameClusterCA = "cluster-ca"
	CertNameClientsCA = "clients-ca"
	CertNameBroker    = "broker"
	CertNameEtcd      = "etcd"
	CertNameOperator  = "operator"
	CertNameListener  = "listener"
)

// Keys of the public Secret <cluster>-cluster-ca-cert besides ca.crt
// (Strimzi's names): a PKCS#12 truststore of the same certificates for
// Java clients and its password.
const (
	CAP12Key      = "ca.p12"
	CAPasswordKey = "ca.password"
)

// now is the reconciler's clock for certificate decisions.
func (r *KafkaClusterReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

// renewPolicy is spec.security.clusterCA's renewal, defaulted.
func renewPolicy(kc *strata.KafkaCluster) pki.RenewPolicy {
	ca := kc.Spec.Security.ClusterCA
	return pki.RenewPolicy{RenewBefore: durationOr(ca.RenewBefore, pki.DefaultRenewBefore), RenewFraction: float64(ca.RenewPercent) / 100}
}

// BrokerCertHosts are the SANs of the brokers' certificate: every broker
// pod's DNS name (its advertised address on every listener, the
// REPLICATION one included) for the given replicas per zone, the headless
// and the bootstrap Service, each short and fully qualified.
func BrokerCertHosts(kc *strata.KafkaCluster, replicas map[string]int32) []string {
	headless := HeadlessServiceName(kc.Name)
	domain := fmt.Sprintf("%s.%s.svc", headless, kc.Namespace)
	hosts := serviceNames(BootstrapServiceName(kc.Name), kc.Namespace)
	hosts = append(hosts, serviceNames(headless, kc.Namespace)...)
	zones := make([]string, 0, len(replicas))
	for z := range replicas {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		for i := int32(0); i < replicas[z]; i++ {
			pod := BrokerPodName(kc.Name, z, i)
			hosts = append(hosts, pod+"."+domain, pod+"."+domain+".cluster.local")
		}
	}
	return hosts
}

// EtcdCertHosts are the SANs of the managed etcd members' certificate.
func EtcdCertHosts(kc *strata.KafkaCluster) []string {
	m, _ := ManagedEtcd(kc)
	hosts := serviceNames(EtcdName(kc.Name), kc.Namespace)
	for i := int32(0); i < m.Replicas; i++ {
		member := etcdMemberName(kc, i) + "." + etcdServiceDomain(kc)
		hosts = append(hosts, member, member+".cluster.local")
	}
	return append(hosts, "localhost", "127.0.0.1")
}

func serviceNames(svc, ns string) []string {
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
}

// reconcileCertificates keeps the cluster CA and the certificates it
// issues in Secrets owned by the KafkaCluster, renews them before they
// expire, and reports them in status.certificates.
//
// Nothing restarts a broker for a renewal: the brokers re-read their
// certificate and CA files at the next TLS handshake once the kubelet
// has updated the mounted Secret, and the CA is renewed with its key, so
// certificates issued under the old and the new CA certificate verify
// against either (pki package doc). The managed etcd reads its trusted CA
// only at start, so its pod template carries the trust bundle's hash and
// a CA renewal rolls its members (the StatefulSet's RollingUpdate).
func (r *KafkaClusterReconciler) reconcileCertificates(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	now := r.now()
	policy := renewPolicy(kc)
	var status []strata.CertificateStatus

	ca, bundle, err := r.ensureClusterCA(ctx, kc, policy, now)
	if err != nil {
		return err
	}
	s.trustBundle = bundle
	status = append(status, certStatus(CertNameClusterCA, ClusterCASecretName(kc.Name), ca.Cert, &policy))
	// The clients CA only signs KafkaUser certificates (the KafkaUser
	// controller issues them); the brokers trust its ca.crt on client
	// listeners with tls.clientAuth, never on REPLICATION.
	clientsCA, _, err := r.ensureCA(ctx, kc, ClientsCASecretName(kc.Name), "strata clients CA", policy, now)
	if err != nil {
		return fmt.Errorf("clients CA: %w", err)
	}
	status = append(status, certStatus(CertNameClientsCA, ClientsCASecretName(kc.Name), clientsCA.Cert, &policy))

	replicas, err := r.brokerReplicas(ctx, kc)
	if err != nil {
		return err
	}
	leaves := []struct {
		name, secret string
		subject      pkix.Name
		hosts        []string
		client       bool
		want         bool
	}{
		{CertNameBroker, BrokerCertsSecretName(kc.Name), BrokerCertSubject, BrokerCertHosts(kc, replicas), false, true},
		{CertNameEtcd, EtcdCertsSecretName(kc.Name), EtcdCertSubject, EtcdCertHosts(kc), false, isManagedEtcd(kc)},
		{CertNameOperator, OperatorCertSecretName(kc.Name), OperatorCertSubject, nil, true, true},
	}
	for _, l := range leaves {
		if !l.want {
			continue
		}
		leaf, err := r.ensureLeaf(ctx, kc, ca, bundle, l.secret, l.subject, l.hosts, l.client, policy, now)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", l.name, err)
		}
		status = append(status, certStatus(l.name, l.secret, leaf, &policy))
	}
	if err := r.ensureMetricsToken(ctx, kc); err != nil {
		return fmt.Errorf("metrics token: %w", err)
	}
	if _, err := externalEtcdTLS(ctx, r.liveReader(), kc); err != nil {
		return &invalidSpecError{reason: ReasonInvalidSpec, message: err.Error()}
	}
	// Clients verify the client listeners with the cluster CA, or with
	// the ca.crt of the listener certificate's Secret when the spec names
	// one (what the brokers trust on those listeners too).
	clientTrust := bundle
	if ref := kc.Spec.Security.ListenerCertificate; ref != nil {
		cert, caPEM, err := r.listenerCertificate(ctx, kc, ref.Name)
		if err != nil {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventListenerCertProblem, "Certificates", "%v", err)
			return &invalidSpecError{reason: ReasonInvalidSpec, message: err.Error()}
		}
		status = append(status, certStatus(CertNameListener, ref.Name, cert, nil))
		clientTrust = caPEM
	}
	if err := r.ensureClusterCACert(ctx, kc, clientTrust); err != nil {
		return err
	}
	kc.Status.Certificates = status
	return nil
}

// ensureClusterCACert keeps the public Secret <cluster>-cluster-ca-cert,
// what clients are given to trust the brokers instead of the CA's own
// Secret (which holds its key): ca.crt, the certificates of trust (all of
// them during a CA renewal), and ca.p12 / ca.password, a PKCS#12
// truststore of them. Only the parsed CERTIFICATE blocks are written, so
// no other PEM block of a user's Secret reaches it. With no trust (a
// listener certificate whose Secret has no ca.crt: clients use their
// system roots) the Secret holds no keys.
func (r *KafkaClusterReconciler) ensureClusterCACert(ctx context.Context, kc *strata.KafkaCluster, trust []byte) error {
	name := ClusterCACertSecretName(kc.Name)
	got, err := r.ownedSecret(ctx, kc, name)
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	if len(trust) > 0 {
		certs, err := pki.ParseCertificates(trust)
		if err != nil {
			return fmt.Errorf("Secret %s: %w", name, err)
		}
		var certPEM []byte
		for _, c := range certs {
			certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		p12, password, err := caTruststore(got, certs)
		if err != nil {
			return fmt.Errorf("Secret %s: %w", name, err)
		}
		data = map[string][]byte{CACertKey: certPEM, CAP12Key: p12, CAPasswordKey: password}
	}
	return r.writeSecret(ctx, kc, got, name, corev1.SecretTypeOpaque, data)
}

// caTruststore returns ca.p12 and ca.password for certs, kept as stored
// while they hold exactly certs (an encoding is salted: re-encoding would
// rewrite the Secret at every resync). A new truststore keeps the stored
// password, so clients' ssl.truststore.password does not change on a CA
// renewal; the first one gets a random password (128 bits). Modern2023
// as the KafkaUsers' keystores.
func caTruststore(stored *corev1.Secret, certs []*x509.Certificate) (p12, password []byte, err error) {
	if stored != nil {
		p12, password = stored.Data[CAP12Key], stored.Data[CAPasswordKey]
		if len(p12) > 0 && len(password) > 0 {
			got, err := pkcs12.DecodeTrustStore(p12, string(password))
			if err == nil && slices.EqualFunc(got, certs, (*x509.Certificate).Equal) {
				return p12, password, nil
			}
		}
	}
	if len(password) == 0 {
		password = []byte(rand.Text())
	}
	if p12, err = pkcs12.Modern2023.EncodeTrustStore(certs, string(password)); err != nil {
		return nil, nil, fmt.Errorf("encode PKCS#12 truststore: %w", err)
	}
	return p12, password, nil
}

func isManagedEtcd(kc *strata.KafkaCluster) bool {
	_, managed := ManagedEtcd(kc)
	return managed
}

// brokerReplicas is, per zone, the larger of the spec's brokers and the
// zone StatefulSet's current replicas: a broker being drained before a
// scale-down still serves its partitions to followers that check its
// name, and a zone that left the spec keeps its pods until drained.
func (r *KafkaClusterReconciler) brokerReplicas(ctx context.Context, kc *strata.KafkaCluster) (map[string]int32, error) {
	out := map[string]int32{}
	for _, z := range kc.Spec.Zones {
		out[z.Name] = z.Brokers
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return nil, fmt.Errorf("list broker pods: %w", err)
	}
	for _, p := range pods.Items {
		z := p.Labels[LabelZone]
		rest, ok := strings.CutPrefix(p.Name, ZoneStatefulSetName(kc.Name, z)+"-")
		if ord, err := strconv.ParseInt(rest, 10, 32); ok && err == nil && int32(ord)+1 > out[z] {
			out[z] = int32(ord) + 1
		}
	}
	return out, nil
}

// ensureClusterCA returns the cluster CA, creating it on first use and
// renewing its certificate (same key) when due, and the trust bundle: the
// current CA certificate and the earlier ones not yet expired.
func (r *KafkaClusterReconciler) ensureClusterCA(ctx context.Context, kc *strata.KafkaCluster, policy pki.RenewPolicy, now time.Time) (*pki.KeyPair, []byte, error) {
	return r.ensureCA(ctx, kc, ClusterCASecretName(kc.Name), "strata cluster CA", policy, now)
}

// ensureCA is ensureClusterCA for the CA in Secret name, whose
// certificate is named "<title> <namespace>/<cluster>".
func (r *KafkaClusterReconciler) ensureCA(ctx context.Context, kc *strata.KafkaCluster, name, title string, policy pki.RenewPolicy, now time.Time) (*pki.KeyPair, []byte, error) {
	validity := durationOr(kc.Spec.Security.ClusterCA.Validity, pki.DefaultCAValidity)
	got, err := r.ownedSecret(ctx, kc, name)
	if err != nil {
		return nil, nil, err
	}
	var ca *pki.KeyPair
	var previous []*x509.Certificate
	if got != nil {
		ca, err = pki.ParseKeyPair(got.Data[TLSCertKey], got.Data[TLSKeyKey])
		if err != nil {
			// Never replace a CA silently: every certificate of the
			// cluster hangs on it. The user deletes the Secret to start
			// over.
			return nil, nil, fmt.Errorf("Secret %s: %w (delete it to have a new CA issued)", name, err)
		}
		previous, _ = pki.ParseCertificates(got.Data[CACertKey])
	}
	switch {
	case ca == nil:
		if ca, err = pki.NewCA(fmt.Sprintf("%s %s/%s", title, kc.Namespace, kc.Name), validity, now); err != nil {
			return nil, nil, err
		}
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventCAIssued, "Certificates", "issued %s in Secret %s, valid until %s", title, name, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	case policy.Due(ca.Cert, now):
		old := ca.Cert
		if ca, err = pki.RenewCA(ca, validity, now); err != nil {
			return nil, nil, err
		}
		previous = append(previous, old)
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventCARenewed, "Certificates", "renewed %s (same key) in Secret %s: valid until %s; the previous certificate (until %s) stays trusted until it expires", title, name, ca.Cert.NotAfter.UTC().Format(time.RFC3339), old.NotAfter.UTC().Format(time.RFC3339))
	}
	bundle := pki.TrustBundle(ca.Cert, previous, now)
	data := map[string][]byte{TLSCertKey: ca.CertPEM, TLSKeyKey: ca.KeyPEM, CACertKey: bundle}
	if err := r.writeSecret(ctx, kc, got, name, corev1.SecretTypeTLS, data); err != nil {
		return nil, nil, err
	}
	return ca, bundle, nil
}

// ensureLeaf keeps a certificate of the cluster CA in Secret name
// (tls.crt, tls.key, ca.crt = the trust bundle), re-issued when it is not
// signed by the CA, due for renewal or lacks one of hosts.
func (r *KafkaClusterReconciler) ensureLeaf(ctx context.Context, kc *strata.KafkaCluster, ca *pki.KeyPair, bundle []byte, name string,
	subject pkix.Name, hosts []string, clientOnly bool, policy pki.RenewPolicy, now time.Time) (*x509.Certificate, error) {
	got, err := r.ownedSecret(ctx, kc, name)
	if err != nil {
		return nil, err
	}
	reason := "new"
	var leaf *pki.KeyPair
	if got != nil {
		if leaf, err = pki.ParseKeyPair(got.Data[TLSCertKey], got.Data[TLSKeyKey]); err != nil {
			reason = err.Error()
		} else {
			reason = pki.Reason(leaf.Cert, ca.Cert, hosts, policy, now)
		}
	}
	if reason != "" {
		if leaf, err = ca.Issue(pki.LeafOptions{Subject: subject, Hosts: hosts, Client: clientOnly}, now); err != nil {
			return nil, err
		}
		log.FromContext(ctx).Info("issued certificate", "secret", name, "reason", reason, "notAfter", leaf.Cert.NotAfter)
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventCertificateIssued, "Certificates", "issued %s in Secret %s (%s), valid until %s",
			subject.CommonName, name, reason, leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	data := map[string][]byte{TLSCertKey: leaf.CertPEM, TLSKeyKey: leaf.KeyPEM, CACertKey: bundle}
	if err := r.writeSecret(ctx, kc, got, name, corev1.SecretTypeTLS, data); err != nil {
		return nil, err
	}
	return leaf.Cert, nil
}

// ownedSecret reads a Secret the operator writes; nil when there is none.
func (r *KafkaClusterReconciler) ownedSecret(ctx context.Context, kc *strata.KafkaCluster, name string) (*corev1.Secret, error) {
	want := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: name}}
	got := &corev1.Secret{}
	found, err := r.getOwned(ctx, kc, want, got)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %w", name, err)
	}
	if !found {
		return nil, nil
	}
	return got, nil
}

// writeSecret applies a Secret of type typ when its data differs from
// what is stored (got, nil when absent).
func (r *KafkaClusterReconciler) writeSecret(ctx context.Context, kc *strata.KafkaCluster, got *corev1.Secret, name string, typ corev1.SecretType, data map[string][]byte) error {
	if got != nil && got.Type == typ && len(got.Data) == len(data) && metav1.IsControlledBy(got, kc) {
		same := true
		for k, v := range data {
			same = same && string(got.Data[k]) == string(v)
		}
		if same {
			return nil
		}
	}
	want := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(kc, name, clusterLabels(kc, "certificates")),
		Type:       typ,
		Data:       data,
	}
	if got == nil {
		got = &corev1.Secret{}
	}
	return r.apply(ctx, kc, "Secret", want, &corev1ac.SecretApplyConfiguration{}, got)
}

// listenerCertificate reads and checks spec.security.listenerCertificate:
// tls.crt and tls.key must be a pair; ca.crt is needed when a listener
// asks for client certificates. It returns the certificate and the
// Secret's ca.crt when that holds a certificate (else nil).
func (r *KafkaClusterReconciler) listenerCertificate(ctx context.Context, kc *strata.KafkaCluster, name string) (*x509.Certificate, []byte, error) {
	var sec corev1.Secret
	if err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("security.listenerCertificate: Secret %s not found", name)
		}
		return nil, nil, fmt.Errorf("security.listenerCertificate: read Secret %s: %w", name, err)
	}
	kp, err := tls.X509KeyPair(sec.Data[TLSCertKey], sec.Data[TLSKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("security.listenerCertificate: Secret %s: %s and %s: %w", name, TLSCertKey, TLSKeyKey, err)
	}
	_, caErr := pki.ParseCertificates(sec.Data[CACertKey])
	if caErr != nil && slices.ContainsFunc(kc.Spec.Listeners, func(l strata.ListenerSpec) bool {
		return l.TLS != nil && l.TLS.ClientAuth != "" && l.TLS.ClientAuth != strata.ClientAuthNone
	}) {
		return nil, nil, fmt.Errorf("security.listenerCertificate: Secret %s has no usable %s, which a listener with tls.clientAuth needs: %w", name, CACertKey, caErr)
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("security.listenerCertificate: Secret %s: %w", name, err)
	}
	if caErr != nil {
		if len(sec.Data[CACertKey]) > 0 {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventListenerCertProblem, "Certificates",
				"security.listenerCertificate: Secret %s: %s: %v; Secret %s holds no CA certificate for clients", name, CACertKey, caErr, ClusterCACertSecretName(kc.Name))
		}
		return cert, nil, nil
	}
	return cert, sec.Data[CACertKey], nil
}

func certStatus(name, secret string, c *x509.Certificate, p *pki.RenewPolicy) strata.CertificateStatus {
	st := strata.CertificateStatus{Name: name, Secret: secret, Subject: c.Subject.String(), NotAfter: metav1.NewTime(c.NotAfter)}
	if p != nil {
		at := metav1.NewTime(p.RenewAt(c))
		st.RenewAt = &at
	}
	return st
}

// trustBundleHash is the pod template annotation that rolls the managed
// etcd when the trust bundle changes.
func trustBundleHash(bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return hex.EncodeToString(sum[:])
}

// OperatorTLSConfig is the operator's TLS client configuration towards
// kc's REPLICATION listener and managed etcd: its client certificate
// (CN=strata-operator) and the trust bundle, from Secret
// <cluster>-operator-cert, with the Secret's fingerprint so that callers
// caching a client rebuild it after a renewal.
func OperatorTLSConfig(ctx context.Context, secrets client.Reader, kc *strata.KafkaCluster) (*tls.Config, string, error) {
	var sec corev1.Secret
	name := OperatorCertSecretName(kc.Name)
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, &sec); err != nil {
		return nil, "", fmt.Errorf("Secret %s: %w", name, err)
	}
	cert, err := tls.X509KeyPair(sec.Data[TLSCertKey], sec.Data[TLSKeyKey])
	if err != nil {
		return nil, "", fmt.Errorf("Secret %s: %w", name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[CACertKey]) {
		return nil, "", fmt.Errorf("Secret %s: no CA certificate in %s", name, CACertKey)
	}
	h := sha256.New()
	for _, k := range []string{TLSCertKey, TLSKeyKey, CACertKey} {
		h.Write(sec.Data[k])
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}, hex.EncodeToString(h.Sum(nil)), nil
}
