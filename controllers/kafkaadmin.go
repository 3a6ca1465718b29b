package controllers

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Timeouts of the operator's Kafka admin clients. A reconcile must never
// hang on a broker that does not answer: every admin call is also bounded
// by the reconcile's context (adminCallTimeout).
const (
	adminDialTimeout     = 5 * time.Second
	adminRequestOverhead = 10 * time.Second
	adminRetryTimeout    = 15 * time.Second
	adminMetadataMinAge  = time.Second
	adminMaxRetryBackoff = 2 * time.Second
	adminFirstRetryWait  = 100 * time.Millisecond
	// AdminCallTimeout bounds one admin conversation of a reconcile (a
	// few requests):
	// brokers that cannot be reached make the reconcile
	// report a condition and requeue instead of blocking a worker.
	AdminCallTimeout = 30 * time.Second
)

// BrokerEndpoints says how the operator reaches a cluster's brokers. In a
// Kubernetes cluster that is the bootstrap Service and each pod's DNS name
// (ServiceEndpoints); envtest suites point it at broker processes on the
// loopback.
type BrokerEndpoints interface {
	// Bootstrap returns the seed addresses (host:port) of the cluster's
	// Kafka admin client.
	Bootstrap(kc *strata.KafkaCluster) ([]string, error)
	// HTTP returns the base URL (scheme://host:port) of the HTTP endpoint
	// (/metrics, /readyz) of broker id, pod ordinal of zone.
	HTTP(kc *strata.KafkaCluster, zone string, ordinal, id int32) (string, error)
}

// BrokerTLS is implemented by BrokerEndpoints whose Bootstrap addresses
// may need TLS.
type BrokerTLS interface {
	// TLS returns the client TLS configuration towards kc's Bootstrap
	// addresses (nil: plaintext) and a fingerprint that changes with it.
	TLS(ctx context.Context, kc *strata.KafkaCluster) (cfg *tls.Config, fingerprint string, err error)
}

// ServiceEndpoints reaches brokers through the Services the operator
// renders: the headless Service for Kafka, the headless Service's pod DNS
// names for the brokers' HTTP endpoint.
//
// The admin client talks to the brokers' REPLICATION listener, with its
// client certificate of the cluster CA (CN=strata-operator, read from
// Secrets), whatever the client listeners are: it needs no SCRAM
// credential of its own, and a user who changes, secures or removes
// client listeners cannot lock the operator out. Its principal is one of
// the brokers' super users (SuperUsers). The one exception is a cluster
// of a release before REPLICATION while it rolls onto it
// (UpgradingInterBroker): its old brokers neither serve nor register
// REPLICATION, so until every zone's config replicates over it the
// client uses the cluster's PLAINTEXT listener (legacyAdminListener), as
// those releases did; otherwise the roll, which reads the Kafka metadata
// before each restart, could never start.
type ServiceEndpoints struct {
	// Secrets reads <cluster>-operator-cert and the zone ConfigMaps.
	Secrets client.Reader
}

var _ BrokerTLS = ServiceEndpoints{}

// Bootstrap is <cluster>-brokers.<namespace>.svc:9091 (REPLICATION), or
// <cluster>-bootstrap.<namespace>.svc:<port> of the PLAINTEXT listener
// during an upgrade onto REPLICATION.
func (e ServiceEndpoints) Bootstrap(kc *strata.KafkaCluster) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminDialTimeout)
	defer cancel()
	if l, ok := legacyAdminListener(ctx, e.Secrets, kc); ok {
		return []string{fmt.Sprintf("%s.%s.svc:%d", BootstrapServiceName(kc.Name), kc.Namespace, l.Port)}, nil
	}
	return []string{fmt.Sprintf("%s.%s.svc:%d", HeadlessServiceName(kc.Name), kc.Namespace, ReplicationPort)}, nil
}

// TLS is the operator's client certificate and the cluster CA
// (OperatorTLSConfig); nil (plaintext) during an upgrade onto
// REPLICATION.
func (e ServiceEndpoints) TLS(ctx context.Context, kc *strata.KafkaCluster) (*tls.Config, string, error) {
	if e.Secrets == nil {
		return nil, "", fmt.Errorf("no Secret reader for the operator's client certificate")
	}
	if _, ok := legacyAdminListener(ctx, e.Secrets, kc); ok {
		return nil, "", nil
	}
	return OperatorTLSConfig(ctx, e.Secrets, kc)
}

// legacyAdminListener is the PLAINTEXT client listener of a cluster whose
// zone configs do not all replicate over REPLICATION yet (configs of a
// release before it, or the first roll of the upgrade), with the
// defaults such a cluster keeps (LegacySecurityDefaults). A new cluster
// (no configs) or a read error: none.
func legacyAdminListener(ctx context.Context, r client.Reader, kc *strata.KafkaCluster) (strata.ListenerSpec, bool) {
	if r == nil {
		return strata.ListenerSpec{}, false
	}
	var configs []string
	for _, z := range kc.Spec.Zones {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: ZoneConfigMapName(kc.Name, z.Name)}, cm); err != nil {
			continue
		}
		configs = append(configs, cm.Data[BrokerConfigFile])
	}
	if !slices.ContainsFunc(configs, func(c string) bool {
		return !strings.Contains(c, "\ninter.broker.listener.name="+ReplicationListener+"\n")
	}) {
		return strata.ListenerSpec{}, false
	}
	return plaintextListener(WithSecurityDefaults(kc, LegacySecurityDefaults(kc, configs)))
}

// plaintextListener is the first client listener of protocol PLAINTEXT.
func plaintextListener(kc *strata.KafkaCluster) (strata.ListenerSpec, bool) {
	for _, l := range Listeners(kc) {
		if l.Protocol == "PLAINTEXT" {
			return l, true
		}
	}
	return strata.ListenerSpec{}, false
}

// HTTP is http://<pod>.<cluster>-brokers.<namespace>.svc:9644.
func (ServiceEndpoints) HTTP(kc *strata.KafkaCluster, zone string, ordinal, _ int32) (string, error) {
	return fmt.Sprintf("http://%s.%s.%s.svc:%d", BrokerPodName(kc.Name, zone, ordinal), HeadlessServiceName(kc.Name), kc.Namespace, brokerMetricsPort), nil
}

// AdminPool keeps one Kafka admin client per KafkaCluster, shared by the
// reconcilers. A client is rebuilt when the cluster's seed addresses
// change and closed when the cluster goes away.
type AdminPool struct {
	endpoints BrokerEndpoints

	mu      sync.Mutex
	clients map[types.NamespacedName]*pooledAdmin
	// ledger is the reassignments started through Reassign, for
	// readPlanMetadata's check of a view against them.
	ledger reassignLedger
}

type pooledAdmin struct {
	seeds []string
	// tlsFingerprint identifies the TLS configuration the client was
	// built with ("" for plaintext): a renewed certificate rebuilds it.
	tlsFingerprint string
	kgo            *kgo.Client
	adm            *kadm.Client
}

// NewAdminPool returns a pool reaching brokers through endpoints (nil:
// ServiceEndpoints).
func NewAdminPool(endpoints BrokerEndpoints) *AdminPool {
	if endpoints == nil {
		endpoints = ServiceEndpoints{}
	}
	return &AdminPool{endpoints: endpoints, clients: map[types.NamespacedName]*pooledAdmin{}}
}

// Endpoints is how the pool reaches brokers.
func (p *AdminPool) Endpoints() BrokerEndpoints { return p.endpoints }

// Admin returns the admin client of kc. Creating it does not dial: an
// unreachable cluster shows up as errors of the calls made with it.
func (p *AdminPool) Admin(kc *strata.KafkaCluster) (*kadm.Client, error) {
	seeds, err := p.endpoints.Bootstrap(kc)
	if err != nil {
		return nil, fmt.Errorf("broker addresses of %s/%s: %w", kc.Namespace, kc.Name, err)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("broker addresses of %s/%s: none known", kc.Namespace, kc.Name)
	}
	// The same seeds in another order are the same cluster: rebuilding
	// the client would close it under a reconcile that is using it.
	seeds = slices.Sorted(slices.Values(seeds))
	var tlsCfg *tls.Config
	var fingerprint string
	if bt, ok := p.endpoints.(BrokerTLS); ok {
		// Admin has no context of its own (its callers' calls carry
		// theirs); the read is from the informer cache, bounded anyway.
		ctx, cancel := context.WithTimeout(context.Background(), adminDialTimeout)
		tlsCfg, fingerprint, err = bt.TLS(ctx, kc)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("TLS towards %s/%s: %w", kc.Namespace, kc.Name, err)
		}
	}
	key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		if slices.Equal(c.seeds, seeds) && c.tlsFingerprint == fingerprint {
			return c.adm, nil
		}
		c.kgo.Close()
		delete(p.clients, key)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("strata-operator"),
		kgo.DialTimeout(adminDialTimeout),
		kgo.RequestTimeoutOverhead(adminRequestOverhead),
		kgo.RetryTimeout(adminRetryTimeout),
		kgo.MetadataMinAge(adminMetadataMinAge),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := adminFirstRetryWait << min(tries, 5)
			return min(d, adminMaxRetryBackoff)
		}),
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("admin client for %s/%s: %w", kc.Namespace, kc.Name, err)
	}
	c := &pooledAdmin{seeds: slices.Clone(seeds), tlsFingerprint: fingerprint, kgo: cl, adm: kadm.NewClient(cl)}
	p.clients[key] = c
	return c.adm, nil
}

// Client returns the Kafka client under kc's admin client, for requests
// kadm does not route as needed (a broker resource's config sent to
// another broker than the one it names).
func (p *AdminPool) Client(kc *strata.KafkaCluster) (*kgo.Client, error) {
	if _, err := p.Admin(kc); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}]
	if !ok {
		return nil, fmt.Errorf("admin client of %s/%s closed meanwhile", kc.Namespace, kc.Name)
	}
	return c.kgo, nil
}

// Forget closes and drops the client of a cluster that went away.
func (p *AdminPool) Forget(key types.NamespacedName) {
	p.ledger.forget(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		c.kgo.Close()
		delete(p.clients, key)
	}
}

// Close closes every client.
func (p *AdminPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, c := range p.clients {
		c.kgo.Close()
		delete(p.clients, key)
	}
}
