package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Condition reasons of a KafkaUser's Ready condition. They are API.
// ClusterNotFound, KafkaUnreachable and KafkaError are shared with
// KafkaTopic.
const (
	ReasonUserReady              = "UserReady"
	ReasonSecretConflict         = "SecretConflict"
	ReasonPasswordSecretNotFound = "PasswordSecretNotFound"
	// ReasonPasswordSecretNotLabelled: the Secret the password is read
	// from lacks LabelSecretAccess=true.
	ReasonPasswordSecretNotLabelled = "PasswordSecretNotLabelled"
	ReasonAclsNotSupported          = "AclsNotSupported"
	ReasonAclsRefused               = "AclsRefused"
	ReasonReservedName              = "ReservedName"
	ReasonClientsCANotReady         = "ClientsCANotReady"
	// ReasonNoClientCertificateListener: a tls user's certificate is
	// issued and its ACLs set, but no listener of its cluster accepts
	// client certificates, so it cannot log in.
	ReasonNoClientCertificateListener = "NoClientCertificateListener"
)

// Event reasons of a KafkaUser.
const (
	EventSecretCreated         = "SecretCreated"
	EventSecretUpdated         = "SecretUpdated"
	EventCredentialsSet        = "CredentialsSet"
	EventCredentialsDeleted    = "CredentialsDeleted"
	EventAclsChanged           = "AclsChanged"
	EventAclsDeleted           = "AclsDeleted"
	EventUserNotReady          = "UserNotReady"
	EventUserNotManaged        = "UserNotManaged"
	EventUserCertificateIssued = "CertificateIssued"
)

// Keys of the user's Secret. They are what Strimzi writes, so clients and
// charts made for Strimzi users can mount it unchanged.
const (
	UserSecretUsername  = "username"
	UserSecretPassword  = "password"
	UserSecretMechanism = "mechanism"
	UserSecretJAAS      = "sasl.jaas.config"
	// A tls user's Secret: the clients CA (ca.crt, what the brokers
	// check the certificate against) and the user's certificate and key.
	UserSecretCACert = "ca.crt"
	UserSecretCert   = "user.crt"
	UserSecretKey    = "user.key"
	// UserSecretP12 is the same key and certificate (with the clients CA)
	// as a PKCS#12 keystore for Java clients (ssl.keystore.type=PKCS12),
	// encrypted with the password in UserSecretP12Password.
	UserSecretP12         = "user.p12"
	UserSecretP12Password = "user.password"
	// MechanismTLS is status.mechanism of a tls user.
	MechanismTLS = "TLS"
)

// ReservedUserNames are the identities of the brokers, the operator and
// the managed etcd (their certificates' common names). A KafkaUser of
// such a name would take their place: a SCRAM user strata-broker is what
// a SASL inter-broker listener logs in as (strata dev --security), and a
// tls user's certificate would carry their common name. The CRD refuses
// them; the controller refuses them too for objects stored before.
var ReservedUserNames = []string{BrokerCertSubject.CommonName, OperatorCertSubject.CommonName, EtcdCertSubject.CommonName}

const (
	// UserFinalizer holds a KafkaUser until its credential and ACLs are
	// removed from the brokers.
	UserFinalizer = "kafka.strata.dev/user"
	// AnnotationPasswordApplied on the user's Secret is the SHA-256 of
	// the password the brokers last received. A password changed in the
	// Secret (or in the Secret spec.authentication.password names) no
	// longer matches it, so the credential is set again. It says nothing
	// the Secret's readers do not already know.
	AnnotationPasswordApplied = "kafka.strata.dev/password-sha256"
	// ScramIterations is the iteration count of every credential the
	// operator sets: Kafka's default and minimum (4096-16384 are
	// accepted). Higher counts slow down each PLAIN login on the broker and
	// each SCRAM login on the client, and buy little against a random
	// password.
	ScramIterations = 4096
	// DefaultUserResync is how often a KafkaUser is compared with the
	// brokers when nothing in Kubernetes changes: it finds ACLs and
	// credentials changed with other tools, and a changed password in the
	// Secret that spec.authentication.password names (that Secret is not
	// watched: the operator caches only Secrets it writes).
	DefaultUserResync = time.Minute
	// clusterResourceName is the name Kafka gives the cluster resource.
	clusterResourceName = "kafka-cluster"
	// indexUserCluster indexes KafkaUsers by spec.clusterRef.name.
	indexUserCluster = "spec.clusterRef.name"
)

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkausers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkausers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkausers/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// KafkaUserReconciler makes a Kafka user (SCRAM credential and ACLs of
// principal User:<name>) match its KafkaUser through the Kafka admin API of
// the user's cluster, and keeps the client settings in a Secret.
type KafkaUserReconciler struct {
	client.Client
	// SecretReader reads Secrets the cache does not hold: the password
	// Secret a user names, and a Secret of the user's name that the
	// operator did not write (reported, never taken over).
	SecretReader client.Reader
	Recorder     recorder.EventRecorder
	// Admin holds the clusters' Kafka admin clients (kafkaadmin.go).
	Admin *AdminPool
	// Resync is the periodic comparison interval; 0 is DefaultUserResync.
	Resync time.Duration
}

// userScope is what the reconcile steps share.
type userScope struct {
	user      *strata.KafkaUser
	cluster   *strata.KafkaCluster
	adm       *kadm.Client
	mechanism kadm.ScramMechanism
	// secret is the user's Secret as stored, password the one in it.
	secret   *corev1.Secret
	password string
	requeue  time.Duration
}

// userStep is a step of the KafkaUser reconcile.
type userStep = step[*userScope]

// Reconcile brings one Kafka user to its KafkaUser's spec. Its steps run
// as KafkaTopic's (runSteps, steps.go): a step ends the reconcile with a
// topicStop's Ready reason, retried with backoff or at the next resync.
func (r *KafkaUserReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	ku := &strata.KafkaUser{}
	if err := r.Get(ctx, req.NamespacedName, ku); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx).WithValues("kafkaUser", ku.Name, "generation", ku.Generation)
	ctx = log.IntoContext(ctx, logger)

	if !ku.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, ku)
	}
	if err := ensureFinalizer(ctx, r.Client, ku, UserFinalizer); err != nil {
		return ctrl.Result{}, err
	}

	before := ku.DeepCopy()
	s := &userScope{user: ku, mechanism: userMechanism(ku), requeue: cmp.Or(r.Resync, DefaultUserResync)}
	defer func() {
		ku.Status.ObservedGeneration = ku.Generation
		ku.Status.Username = ku.Name
		ku.Status.Principal = UserPrincipal(ku)
		if err := r.Status().Patch(ctx, ku, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			reterr = errors.Join(reterr, fmt.Errorf("patch status: %w", err))
		}
	}()

	actx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	steps := []userStep{{"name", checkUserName}, {"cluster", r.resolveCluster}}
	if isTLSUser(ku) {
		steps = append(steps, userStep{"certificate", r.reconcileCertificate}, userStep{"credentials", r.reconcileTLSCredentials})
	} else {
		steps = append(steps, userStep{"secret", r.reconcileSecret}, userStep{"credentials", r.reconcileCredentials})
	}
	steps = append(steps, userStep{"acls", r.reconcileACLs}, userStep{"quotas", r.reconcileQuotas})
	if isTLSUser(ku) {
		// Last: the certificate and ACLs are in place, so the user can log
		// in as soon as such a listener is added.
		steps = append(steps, userStep{"client certificate listener", checkClientCertificateListener})
	}
	report := stepReport{object: ku, conditions: &ku.Status.Conditions, event: EventUserNotReady, what: "user",
		setReady: func(status metav1.ConditionStatus, reason, msg string) { setUserCondition(ku, status, reason, msg) }}
	if res, stopped, err := runSteps(actx, r.Recorder, report, &s.requeue, s, steps); stopped {
		return res, err
	}
	setUserCondition(ku, metav1.ConditionTrue, ReasonUserReady,
		fmt.Sprintf("user %s: %s credential set, %d ACL bindings", ku.Name, ku.Status.Mechanism, ku.Status.ACLCount))
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// userMechanism is the SCRAM mechanism of spec.authentication.type.
func userMechanism(ku *strata.KafkaUser) kadm.ScramMechanism {
	if ku.Spec.Authentication.Type == strata.AuthenticationScramSha256 {
		return kadm.ScramSha256
	}
	return kadm.ScramSha512
}

// resolveCluster finds the user's KafkaCluster and its admin client.
func (r *KafkaUserReconciler) resolveCluster(ctx context.Context, s *userScope) error {
	ku := s.user
	kc := &strata.KafkaCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ku.Namespace, Name: ku.Spec.ClusterRef.Name}, kc)
	if apierrors.IsNotFound(err) || (err == nil && !kc.DeletionTimestamp.IsZero()) {
		return &topicStop{reason: ReasonClusterNotFound, retry: true,
			message: fmt.Sprintf("KafkaCluster %s not found in namespace %s", ku.Spec.ClusterRef.Name, ku.Namespace)}
	}
	if err != nil {
		return fmt.Errorf("get KafkaCluster: %w", err)
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return &topicStop{reason: ReasonKafkaUnreachable, message: err.Error(), retry: true}
	}
	s.cluster, s.adm = kc, adm
	return nil
}

// reconcileSecret writes the user's Secret (named like the KafkaUser,
// controlled by it): the password from spec.authentication.password, or
// the one already in the Secret, or a new random one; and the username,
// mechanism and JAAS line that go with it. Editing the password in the
// Secret, or deleting the Secret, rotates a generated password.
func (r *KafkaUserReconciler) reconcileSecret(ctx context.Context, s *userScope) error {
	ku := s.user
	password := ""
	if p := ku.Spec.Authentication.Password; p != nil {
		ref := p.ValueFrom.SecretKeyRef
		src := &corev1.Secret{}
		err := r.SecretReader.Get(ctx, client.ObjectKey{Namespace: ku.Namespace, Name: ref.Name}, src)
		if apierrors.IsNotFound(err) {
			return &topicStop{reason: ReasonPasswordSecretNotFound,
				message: fmt.Sprintf("password Secret %s (spec.authentication.password) not found in namespace %s", ref.Name, ku.Namespace)}
		}
		if err != nil {
			return fmt.Errorf("get password Secret %s: %w", ref.Name, err)
		}
		if !SecretAccessGranted(src) {
			// The operator may read every Secret of the namespace; the
			// KafkaUser's author may not. Without the label, a KafkaUser
			// would copy any key of any Secret (a CA key, a cloud
			// credential) into a Secret its author can read.
			return &topicStop{reason: ReasonPasswordSecretNotLabelled,
				message: fmt.Sprintf("password Secret %s (spec.authentication.password) is not labelled %s=true: label it to let KafkaUsers of namespace %s read it", ref.Name, LabelSecretAccess, ku.Namespace)}
		}
		password = string(src.Data[ref.Key])
		if password == "" {
			return &topicStop{reason: ReasonPasswordSecretNotFound,
				message: fmt.Sprintf("password Secret %s has no key %s, or it is empty (spec.authentication.password)", ref.Name, ref.Key)}
		}
	}

	sec, err := r.userSecret(ctx, ku)
	if err != nil {
		return err
	}
	if password == "" && sec != nil {
		password = string(sec.Data[UserSecretPassword])
	}
	if password == "" {
		password = rand.Text()
	}
	if sec, err = r.writeUserSecret(ctx, ku, sec, UserSecretData(ku.Name, s.mechanism, password)); err != nil {
		return err
	}
	s.secret, s.password = sec, password
	return nil
}

// userSecret is the user's Secret (named like the KafkaUser), nil when
// there is none; one the KafkaUser does not control is a conflict.
func (r *KafkaUserReconciler) userSecret(ctx context.Context, ku *strata.KafkaUser) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: ku.Namespace, Name: ku.Name}
	sec := &corev1.Secret{}
	err := r.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		// The cache holds only the operator's Secrets: a miss may be a
		// Secret someone else wrote, which must not be overwritten.
		err = r.SecretReader.Get(ctx, key, sec)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Secret %s: %w", ku.Name, err)
	}
	if !metav1.IsControlledBy(sec, ku) {
		return nil, &topicStop{reason: ReasonSecretConflict,
			message: fmt.Sprintf("Secret %s exists and is not this KafkaUser's; the operator does not take it over: delete or rename it", ku.Name)}
	}
	return sec, nil
}

// writeUserSecret creates the user's Secret with data, or updates sec
// (the stored one) when its data or labels differ. Keys of data only:
// keys of the other authentication type go when the type changes.
func (r *KafkaUserReconciler) writeUserSecret(ctx context.Context, ku *strata.KafkaUser, sec *corev1.Secret, data map[string][]byte) (*corev1.Secret, error) {
	labels := map[string]string{
		LabelName: "strata", LabelInstance: ku.Name, LabelComponent: "user",
		LabelManagedBy: ManagedBy, LabelCluster: ku.Spec.ClusterRef.Name,
	}
	if sec == nil {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ku.Namespace, Name: ku.Name, Labels: labels},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := controllerutil.SetControllerReference(ku, sec, r.Scheme()); err != nil {
			return nil, fmt.Errorf("own Secret %s: %w", ku.Name, err)
		}
		if err := r.Create(ctx, sec); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, &topicStop{reason: ReasonSecretConflict, retry: true,
					message: fmt.Sprintf("Secret %s appeared while the operator created it; retrying", ku.Name)}
			}
			return nil, fmt.Errorf("create Secret %s: %w", ku.Name, err)
		}
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventSecretCreated, "Create",
			"created Secret %s with the credentials of user %s", ku.Name, ku.Name)
	} else if !secretDataEqual(sec.Data, data) || !labelsContain(sec.Labels, labels) {
		patch := client.MergeFrom(sec.DeepCopy())
		sec.Data = data
		if sec.Labels == nil {
			sec.Labels = map[string]string{}
		}
		maps.Copy(sec.Labels, labels)
		if err := r.Patch(ctx, sec, patch); err != nil {
			return nil, fmt.Errorf("update Secret %s: %w", ku.Name, err)
		}
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventSecretUpdated, "Update",
			"updated Secret %s of user %s", ku.Name, ku.Name)
	}
	ku.Status.SecretName = sec.Name
	return sec, nil
}

// UserSecretData is the content of a user's Secret.
func UserSecretData(user string, mech kadm.ScramMechanism, password string) map[string][]byte {
	return map[string][]byte{
		UserSecretUsername:  []byte(user),
		UserSecretPassword:  []byte(password),
		UserSecretMechanism: []byte(mech.String()),
		UserSecretJAAS:      []byte(JAASConfig(user, password)),
	}
}

// JAASConfig is the Java client's sasl.jaas.config line for a SCRAM user.
// Quotes and backslashes are escaped as JAAS reads them.
func JAASConfig(user, password string) string {
	q := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`,
		q.Replace(user), q.Replace(password))
}

func secretDataEqual(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

func labelsContain(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// passwordFingerprint is the value of AnnotationPasswordApplied.
func passwordFingerprint(mech kadm.ScramMechanism, password string) string {
	sum := sha256.Sum256([]byte(mech.String() + "\x00" + password))
	return hex.EncodeToString(sum[:])
}

// reconcileCredentials sets the user's SCRAM credential when the brokers
// lack it (or hold it with other iterations) or the password changed since
// it was last set, and deletes a credential of the other mechanism. The
// brokers never return a password or salt, so "changed" is judged by the
// Secret's AnnotationPasswordApplied: a credential changed with other tools
// under the same mechanism and iterations is not noticed.
func (r *KafkaUserReconciler) reconcileCredentials(ctx context.Context, s *userScope) error {
	ku := s.user
	if ku.Status.Mechanism == MechanismTLS {
		// A former tls user: its certificate principal's ACLs go.
		if err := r.dropPrincipal(ctx, s, tlsUserPrincipal(ku.Name)); err != nil {
			return err
		}
	}
	current, err := describeScram(ctx, s.adm, ku.Name)
	if err != nil {
		return err
	}
	fp := passwordFingerprint(s.mechanism, s.password)
	var upsert []kadm.UpsertSCRAM
	if it, ok := current[s.mechanism]; !ok || it != ScramIterations || s.secret.Annotations[AnnotationPasswordApplied] != fp {
		upsert = append(upsert, kadm.UpsertSCRAM{User: ku.Name, Mechanism: s.mechanism, Iterations: ScramIterations, Password: s.password})
	}
	var del []kadm.DeleteSCRAM
	for m := range current {
		if m != s.mechanism {
			del = append(del, kadm.DeleteSCRAM{User: ku.Name, Mechanism: m})
		}
	}
	if len(upsert) == 0 && len(del) == 0 {
		ku.Status.Mechanism = s.mechanism.String()
		return nil
	}
	res, err := s.adm.AlterUserSCRAMs(ctx, del, upsert)
	if err == nil {
		if one, ok := res[ku.Name]; ok {
			err = withMessage(one.Err, one.ErrMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("set SCRAM credential of user %s: %w", ku.Name, err)
	}
	// From here on the KafkaUser manages the Kafka user: deleting it
	// deletes the user's credentials and ACLs (deleteUser).
	ku.Status.Mechanism = s.mechanism.String()
	if len(upsert) > 0 {
		patch := client.MergeFrom(s.secret.DeepCopy())
		if s.secret.Annotations == nil {
			s.secret.Annotations = map[string]string{}
		}
		s.secret.Annotations[AnnotationPasswordApplied] = fp
		if err := r.Patch(ctx, s.secret, patch); err != nil {
			// The credential is set; the next round sets it once more.
			return fmt.Errorf("annotate Secret %s: %w", s.secret.Name, err)
		}
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventCredentialsSet, "Update",
			"set the %s credential of user %s (%d iterations)", s.mechanism, ku.Name, ScramIterations)
	}
	for _, d := range del {
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventCredentialsDeleted, "Update",
			"deleted the %s credential of user %s (spec.authentication.type is %s)", d.Mechanism, ku.Name, ku.Spec.Authentication.Type)
	}
	return nil
}

// describeScram is the user's SCRAM credentials (mechanism → iterations)
// as the brokers hold them; none for an unknown user.
func describeScram(ctx context.Context, adm *kadm.Client, user string) (map[kadm.ScramMechanism]int32, error) {
	described, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("describe SCRAM credentials of user %s: %w", user, err)
	}
	out := map[kadm.ScramMechanism]int32{}
	d, ok := described[user]
	if !ok {
		return out, nil
	}
	if d.Err != nil && !errors.Is(d.Err, kerr.ResourceNotFound) {
		return nil, fmt.Errorf("describe SCRAM credentials of user %s: %w", user, withMessage(d.Err, d.ErrMessage))
	}
	for _, c := range d.CredInfos {
		out[c.Mechanism] = c.Iterations
	}
	return out, nil
}

// ACLBinding is one Kafka ACL of a user's principal: one operation on one
// resource pattern, from one host, allowed or denied.
type ACLBinding struct {
	Resource   kmsg.ACLResourceType
	Name       string
	Pattern    kmsg.ACLResourcePatternType
	Operation  kmsg.ACLOperation
	Host       string
	Permission kmsg.ACLPermissionType
}

func (b ACLBinding) String() string {
	return fmt.Sprintf("%s %s on %s %s %q from %s", b.Permission, b.Operation, b.Pattern, b.Resource, b.Name, b.Host)
}

// UserPrincipal is the ACL principal of a KafkaUser: User:<name> for a
// SCRAM user, User:CN=<name> for a tls user (its certificate's subject,
// as the brokers' DEFAULT principal mapping gives it).
func UserPrincipal(ku *strata.KafkaUser) string {
	if isTLSUser(ku) {
		return tlsUserPrincipal(ku.Name)
	}
	return scramUserPrincipal(ku.Name)
}

func scramUserPrincipal(name string) string { return "User:" + name }

func tlsUserPrincipal(name string) string {
	return "User:" + UserCertSubject(name).String()
}

func isTLSUser(ku *strata.KafkaUser) bool {
	return ku.Spec.Authentication.Type == strata.AuthenticationTLS
}

// checkUserName refuses a reserved name (ReservedUserNames).
func checkUserName(_ context.Context, s *userScope) error {
	if slices.Contains(ReservedUserNames, s.user.Name) {
		return &topicStop{reason: ReasonReservedName, message: fmt.Sprintf(
			"KafkaUser name %s is reserved: it is the identity of the cluster's brokers, operator or etcd, and a user of that name could take their place; choose another name", s.user.Name)}
	}
	return nil
}

// DesiredACLs expands spec.authorization into ACL bindings, one per
// operation of each rule, without duplicates, in the order the rules list
// them. Validation guarantees the names parse; an unknown one is an error
// rather than a silently missing ACL.
func DesiredACLs(ku *strata.KafkaUser) ([]ACLBinding, error) {
	if ku.Spec.Authorization == nil {
		return nil, nil
	}
	var out []ACLBinding
	seen := map[ACLBinding]bool{}
	for i, rule := range ku.Spec.Authorization.ACLs {
		rt, err := kmsg.ParseACLResourceType(string(rule.Resource.Type))
		if err != nil {
			return nil, fmt.Errorf("acls[%d]: %w", i, err)
		}
		pattern := kmsg.ACLResourcePatternTypeLiteral
		if rule.Resource.PatternType == strata.ACLPatternPrefixed {
			pattern = kmsg.ACLResourcePatternTypePrefixed
		}
		perm := kmsg.ACLPermissionTypeAllow
		if rule.Type == strata.ACLDeny {
			perm = kmsg.ACLPermissionTypeDeny
		}
		name := rule.Resource.Name
		if rt == kmsg.ACLResourceTypeCluster {
			name = clusterResourceName
		}
		host := cmp.Or(rule.Host, "*")
		for _, o := range rule.Operations {
			op, err := kmsg.ParseACLOperation(string(o))
			if err != nil {
				return nil, fmt.Errorf("acls[%d]: %w", i, err)
			}
			b := ACLBinding{Resource: rt, Name: name, Pattern: pattern, Operation: op, Host: host, Permission: perm}
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// PlanACLs compares the desired bindings with the brokers' and returns the
// ones to create and the ones to delete (the principal's bindings the spec
// does not list).
func PlanACLs(desired, current []ACLBinding) (create, remove []ACLBinding) {
	have := map[ACLBinding]bool{}
	for _, b := range current {
		have[b] = true
	}
	want := map[ACLBinding]bool{}
	for _, b := range desired {
		want[b] = true
		if !have[b] {
			create = append(create, b)
		}
	}
	for _, b := range current {
		if !want[b] {
			remove = append(remove, b)
			want[b] = true // a binding reported twice is removed once
		}
	}
	return create, remove
}

// aclAPIs are the Kafka API keys ACL reconciliation needs.
var aclAPIs = []kmsg.Key{kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs}

// errAclsNotSupported: the brokers do not serve the ACL APIs, or serve
// them without an authorizer (SECURITY_DISABLED).
var errAclsNotSupported = errors.New("ACLs not supported")

// aclAPIsServed says whether every broker serves the ACL APIs.
func aclAPIsServed(ctx context.Context, adm *kadm.Client) error {
	return apisServed(ctx, adm, aclAPIs, errAclsNotSupported)
}

// apisServed says whether every broker serves keys; a broker that does
// not is reported wrapping notSupported.
func apisServed(ctx context.Context, adm *kadm.Client, keys []kmsg.Key, notSupported error) error {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("read API versions: %w", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("read API versions of broker %d: %w", v.NodeID, v.Err)
		}
		for _, k := range keys {
			if _, ok := v.KeyMaxVersion(k.Int16()); !ok {
				return fmt.Errorf("%w: broker %d does not serve %s", notSupported, v.NodeID, k.Name())
			}
		}
	}
	return nil
}

// describeUserACLs is every ACL binding of principal, any resource, pattern,
// host and permission.
func describeUserACLs(ctx context.Context, adm *kadm.Client, principal string) ([]ACLBinding, error) {
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow(principal).AllowHosts().Deny(principal).DenyHosts()
	res, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("describe ACLs of %s: %w", principal, err)
	}
	var out []ACLBinding
	for _, r := range res {
		if r.Err != nil {
			if errors.Is(r.Err, kerr.SecurityDisabled) {
				return nil, fmt.Errorf("%w: %v", errAclsNotSupported, withMessage(r.Err, r.ErrMessage))
			}
			return nil, fmt.Errorf("describe ACLs of %s: %w", principal, withMessage(r.Err, r.ErrMessage))
		}
		for _, d := range r.Described {
			if d.Principal != principal {
				continue
			}
			out = append(out, ACLBinding{Resource: d.Type, Name: d.Name, Pattern: d.Pattern, Operation: d.Operation, Host: d.Host, Permission: d.Permission})
		}
	}
	return out, nil
}

// aclBuilder is a kadm builder for exactly one binding of principal: used
// both to create it and, as an exact filter, to delete it.
func aclBuilder(principal string, b ACLBinding) *kadm.ACLBuilder {
	ab := kadm.NewACLs().ResourcePatternType(b.Pattern).Operations(b.Operation)
	switch b.Resource {
	case kmsg.ACLResourceTypeTopic:
		ab.Topics(b.Name)
	case kmsg.ACLResourceTypeGroup:
		ab.Groups(b.Name)
	case kmsg.ACLResourceTypeCluster:
		ab.Clusters()
	case kmsg.ACLResourceTypeTransactionalId:
		ab.TransactionalIDs(b.Name)
	case kmsg.ACLResourceTypeDelegationToken:
		ab.DelegationTokens(b.Name)
	default:
		ab.AnyResource(b.Name)
	}
	if b.Permission == kmsg.ACLPermissionTypeDeny {
		ab.Deny(principal).DenyHosts(b.Host)
	} else {
		ab.Allow(principal).AllowHosts(b.Host)
	}
	return ab
}

// reconcileACLs makes the ACLs of principal User:<name> the spec's set:
// it creates the missing bindings and deletes the others. Brokers that do
// not serve the ACL APIs (or run no authorizer) leave a user without ACLs
// Ready, and one with ACLs AclsNotSupported: its credential works, its
// ACLs are not there.
func (r *KafkaUserReconciler) reconcileACLs(ctx context.Context, s *userScope) error {
	ku := s.user
	principal := UserPrincipal(ku)
	desired, err := DesiredACLs(ku)
	if err != nil {
		return &topicStop{reason: ReasonAclsRefused, message: fmt.Sprintf("spec.authorization: %v", err)}
	}
	notSupported := func(err error) error {
		ku.Status.ACLCount = 0
		if len(desired) == 0 {
			return nil
		}
		return &topicStop{reason: ReasonAclsNotSupported,
			message: fmt.Sprintf("the brokers of KafkaCluster %s cannot hold ACLs (%v): the credential of user %s is set, its %d ACL bindings are not",
				s.cluster.Name, err, ku.Name, len(desired))}
	}
	if err := aclAPIsServed(ctx, s.adm); err != nil {
		if errors.Is(err, errAclsNotSupported) {
			return notSupported(err)
		}
		return err
	}
	current, err := describeUserACLs(ctx, s.adm, principal)
	if errors.Is(err, errAclsNotSupported) {
		return notSupported(err)
	}
	if err != nil {
		return err
	}
	create, remove := PlanACLs(desired, current)
	var done []string
	for _, b := range create {
		res, err := s.adm.CreateACLs(ctx, aclBuilder(principal, b))
		if err == nil && len(res) != 1 {
			err = fmt.Errorf("%d results for one ACL", len(res))
		}
		if err == nil {
			err = withMessage(res[0].Err, res[0].ErrMessage)
		}
		if errors.Is(err, kerr.InvalidRequest) || errors.Is(err, kerr.SecurityDisabled) {
			return &topicStop{reason: ReasonAclsRefused, message: fmt.Sprintf("the brokers refused ACL %s of %s: %v", b, principal, err)}
		}
		if err != nil {
			return fmt.Errorf("create ACL %s of %s: %w", b, principal, err)
		}
		done = append(done, "+"+b.String())
	}
	for _, b := range remove {
		res, err := s.adm.DeleteACLs(ctx, aclBuilder(principal, b))
		for _, one := range res {
			err = cmp.Or(err, withMessage(one.Err, one.ErrMessage))
			for _, m := range one.Deleted {
				err = cmp.Or(err, withMessage(m.Err, m.ErrMessage))
			}
		}
		if err != nil {
			return fmt.Errorf("delete ACL %s of %s: %w", b, principal, err)
		}
		done = append(done, "-"+b.String())
	}
	if len(done) > 0 {
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventAclsChanged, "Update",
			"changed ACLs of %s: %s", principal, strings.Join(done, ", "))
	}
	ku.Status.ACLCount = int32(len(desired))
	return nil
}

// reconcileDelete removes the user's credentials and ACLs from the brokers,
// then releases the KafkaUser (its Secret goes with it: it is owned). A
// user whose cluster is gone or going has nothing left to remove; one that
// never set a credential (status.mechanism empty) never managed the Kafka
// user of its name and leaves it alone.
func (r *KafkaUserReconciler) reconcileDelete(ctx context.Context, ku *strata.KafkaUser) error {
	if !controllerutil.ContainsFinalizer(ku, UserFinalizer) {
		return nil
	}
	if err := r.deleteUser(ctx, ku); err != nil {
		before := ku.DeepCopy()
		stop := &topicStop{}
		if !errors.As(err, &stop) {
			stop = kafkaFailure("delete user", err)
		}
		setUserCondition(ku, metav1.ConditionFalse, stop.reason, stop.message)
		if perr := r.Status().Patch(ctx, ku, client.MergeFrom(before)); perr != nil && !apierrors.IsNotFound(perr) {
			err = errors.Join(err, fmt.Errorf("patch status: %w", perr))
		}
		return fmt.Errorf("delete user %s: %w", ku.Name, err)
	}
	return releaseFinalizer(ctx, r.Client, ku, UserFinalizer)
}

func (r *KafkaUserReconciler) deleteUser(ctx context.Context, ku *strata.KafkaUser) error {
	kc := &strata.KafkaCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ku.Namespace, Name: ku.Spec.ClusterRef.Name}, kc)
	if apierrors.IsNotFound(err) || (err == nil && !kc.DeletionTimestamp.IsZero()) {
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventCredentialsDeleted, "Delete",
			"KafkaCluster %s is gone: nothing to delete for user %s", ku.Spec.ClusterRef.Name, ku.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get KafkaCluster: %w", err)
	}
	if ku.Status.Mechanism == "" || slices.Contains(ReservedUserNames, ku.Name) {
		// It never got as far as setting a credential (a Secret conflict,
		// a missing password Secret, a cluster that never answered): a
		// Kafka user of this name is someone else's and stays.
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventUserNotManaged, "Delete",
			"left user %s in Kafka: this KafkaUser never set its credential", ku.Name)
		return nil
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return &topicStop{reason: ReasonKafkaUnreachable, message: err.Error(), retry: true}
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()

	// ACLs first: a user whose credential is gone cannot log in, but its
	// ACLs would apply to the next user of that name.
	principal := UserPrincipal(ku)
	if err := aclAPIsServed(ctx, adm); err == nil {
		b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
			Allow(principal).AllowHosts().Deny(principal).DenyHosts()
		res, err := adm.DeleteACLs(ctx, b)
		n := 0
		for _, one := range res {
			if errors.Is(one.Err, kerr.SecurityDisabled) {
				continue
			}
			err = cmp.Or(err, withMessage(one.Err, one.ErrMessage))
			n += len(one.Deleted)
		}
		if err != nil {
			return fmt.Errorf("delete ACLs of %s: %w", principal, err)
		}
		if n > 0 {
			r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventAclsDeleted, "Delete",
				"deleted %d ACL bindings of %s", n, principal)
		}
	} else if !errors.Is(err, errAclsNotSupported) {
		return err
	}

	if err := deleteUserQuotas(ctx, adm, ku); err != nil {
		return err
	}

	if isTLSUser(ku) {
		// No SCRAM credential is its: one of its name is someone else's.
		return nil
	}
	current, err := describeScram(ctx, adm, ku.Name)
	if err != nil {
		return err
	}
	var del []kadm.DeleteSCRAM
	var names []string
	for m := range current {
		del = append(del, kadm.DeleteSCRAM{User: ku.Name, Mechanism: m})
		names = append(names, m.String())
	}
	if len(del) == 0 {
		return nil
	}
	res, err := adm.AlterUserSCRAMs(ctx, del, nil)
	if err == nil {
		if one, ok := res[ku.Name]; ok && !errors.Is(one.Err, kerr.ResourceNotFound) {
			err = withMessage(one.Err, one.ErrMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("delete SCRAM credentials of user %s: %w", ku.Name, err)
	}
	r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventCredentialsDeleted, "Delete",
		"deleted the %s credentials of user %s", strings.Join(names, ", "), ku.Name)
	return nil
}

// setUserCondition sets Ready and the kstatus conditions from its reason:
// a Ready user is Current; a Secret conflict, a missing password Secret,
// brokers without ACL support, refused ACLs or (tls) no listener that
// takes client certificates need someone to act
// (Stalled); anything else is retried (Reconciling).
func setUserCondition(ku *strata.KafkaUser, status metav1.ConditionStatus, reason, msg string) {
	setReadyCondition(&ku.Status.Conditions, ku.Generation, userStalledReasons, "the user matches the spec", status, reason, msg)
}

// userStalledReasons are the Ready reasons that need someone to act.
var userStalledReasons = map[string]bool{
	ReasonSecretConflict:         true,
	ReasonPasswordSecretNotFound: true,
	// Labelling the Secret is found by the resync.
	ReasonPasswordSecretNotLabelled: true,
	ReasonAclsNotSupported:          true,
	ReasonAclsRefused:               true,
	ReasonReservedName:              true,
	// A listener is added to the KafkaCluster; its generation change
	// reconciles the cluster's users.
	ReasonNoClientCertificateListener: true,
}

// SetupWithManager registers the controller. It watches the Secrets it
// writes (a password edited there is set in the brokers at once) and
// KafkaClusters (users of a cluster reconcile when it appears).
func (r *KafkaUserReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &strata.KafkaUser{}, indexUserCluster, func(o client.Object) []string {
		return []string{o.(*strata.KafkaUser).Spec.ClusterRef.Name}
	}); err != nil {
		return fmt.Errorf("index KafkaUsers by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&strata.KafkaUser{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Owns(&corev1.Secret{}).
		Watches(&strata.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.usersOfCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: ClusterWorkers}).
		Named("kafkauser").
		Complete(r)
}

func (r *KafkaUserReconciler) usersOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	var list strata.KafkaUserList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexUserCluster: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list KafkaUsers of KafkaCluster", "kafkaCluster", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
