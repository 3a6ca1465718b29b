package controllers

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/internal/pki"
)

// TLSEtcd is an embedded etcd serving https with client certificates
// required (etcd's --client-cert-auth), as an external etcd a
// KafkaCluster's spec.metadata.externalTLS is for.
type TLSEtcd struct {
	Endpoints []string
	// Secret is what spec.metadata.externalTLS names: ca.crt, and a
	// client certificate of the etcd's CA in tls.crt / tls.key.
	Secret map[string][]byte
}

// StartTLSEtcd starts a TLSEtcd until the test ends.
func StartTLSEtcd(t testing.TB) *TLSEtcd {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("external etcd CA", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue(pki.LeafOptions{Hosts: []string{"127.0.0.1", "localhost"}, Server: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue(pki.LeafOptions{Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{"ca.pem": ca.CertPEM, "server.pem": srv.CertPEM, "server-key.pem": srv.KeyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := meta.StartEmbedded(ctx, t.TempDir(), nil, func(c *embed.Config) {
		u := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
		c.ListenClientUrls, c.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
		c.ClientTLSInfo = transport.TLSInfo{CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
			TrustedCAFile: filepath.Join(dir, "ca.pem"), ClientCertAuth: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return &TLSEtcd{Endpoints: []string{"https://" + e.ClientAddr},
		Secret: map[string][]byte{CACertKey: ca.CertPEM, TLSCertKey: cli.CertPEM, TLSKeyKey: cli.KeyPEM}}
}

// TestBrokerReachesExternalEtcdOverTLS: a broker started from the config
// the operator renders for spec.metadata.externalTLS, with the Secret
// "mounted" where the pod mounts it, joins an etcd that requires client
// certificates; the operator's prober reaches it with the same Secret
// and not without it.
func TestBrokerReachesExternalEtcdOverTLS(t *testing.T) {
	etcd := StartTLSEtcd(t)
	kc := metricsTestCluster()
	kc.Spec.Metadata = strata.MetadataSpec{ExternalEndpoints: etcd.Endpoints, ExternalTLS: &strata.SecretReference{Name: "etcd-client"}}

	cfg := BuildZoneConfigMap(kc, ZoneInput{Zone: kc.Spec.Zones[0]}).Data[BrokerConfigFile]
	for _, line := range []string{
		"metadata.etcd.ssl.ca.location=" + EtcdTLSDir + "/ca.crt",
		"metadata.etcd.ssl.certificate.location=" + EtcdTLSDir + "/tls.crt",
		"metadata.etcd.ssl.key.location=" + EtcdTLSDir + "/tls.key",
	} {
		if !strings.Contains(cfg, "\n"+line+"\n") {
			t.Errorf("rendered config lacks %s", line)
		}
	}
	pod := BuildZoneStatefulSet(kc, ZoneInput{Zone: kc.Spec.Zones[0]}, "h").Spec.Template.Spec
	var mounted bool
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath == EtcdTLSDir {
			for _, v := range pod.Volumes {
				mounted = mounted || (v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "etcd-client")
			}
		}
	}
	if !mounted {
		t.Errorf("Secret etcd-client not mounted at %s", EtcdTLSDir)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcdDir := t.TempDir()
	for k, v := range etcd.Secret {
		if err := os.WriteFile(filepath.Join(etcdDir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsDir := brokerTLSDir(t)
	srv := startRenderedBroker(ctx, t, kc, ZoneInput{Zone: kc.Spec.Zones[0]}, 0, tlsDir, func(kv map[string]string) {
		for k, v := range kv {
			if strings.HasPrefix(v, EtcdTLSDir+"/") {
				kv[k] = etcdDir + strings.TrimPrefix(v, EtcdTLSDir)
			}
		}
	})
	if id := srv.Broker().NodeID(); id != 0 {
		t.Errorf("broker id %d", id)
	}

	// The operator's probe: with the Secret's certificate, and without.
	secret := &corev1.Secret{Data: etcd.Secret}
	secret.Namespace, secret.Name = kc.Namespace, "etcd-client"
	tlsCfg, err := externalEtcdTLS(ctx, staticSecretReader{secret}, kc)
	if err != nil {
		t.Fatal(err)
	}
	if h := (EtcdProber{TLS: tlsCfg}).Probe(ctx, etcd.Endpoints); h.HealthyMembers != 1 {
		t.Errorf("probe with the Secret's certificate: %+v", h)
	}
	noCert := tlsCfg.Clone()
	noCert.Certificates = nil
	if h := (EtcdProber{TLS: noCert, Timeout: 3 * time.Second}).Probe(ctx, etcd.Endpoints); h.HealthyMembers != 0 {
		t.Errorf("probe without a client certificate reached the etcd: %+v", h)
	}
}

// brokerTLSDir writes a broker certificate of a test cluster CA (what
// <cluster>-broker-certs holds) for startRenderedBroker.
func brokerTLSDir(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCA("test cluster CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(pki.LeafOptions{Subject: BrokerCertSubject, Hosts: []string{"127.0.0.1"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{TLSCertKey: leaf.CertPEM, TLSKeyKey: leaf.KeyPEM, CACertKey: ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// staticSecretReader reads one Secret.
type staticSecretReader struct{ sec *corev1.Secret }

func (r staticSecretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key.Namespace != r.sec.Namespace || key.Name != r.sec.Name {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	r.sec.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (staticSecretReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not implemented")
}
