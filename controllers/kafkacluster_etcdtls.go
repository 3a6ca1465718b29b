package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// EtcdTLSDir holds spec.metadata.externalTLS in the broker pods: the CA
// the external etcd's certificate chains to and the client certificate
// the brokers present (metadata.etcd.ssl.*).
const EtcdTLSDir = "/etc/strata-tls/etcd"

// externalEtcdTLS is the operator's TLS configuration towards
// spec.metadata.externalEndpoints from the Secret spec.metadata.externalTLS
// names (nil, nil when it names none): ca.crt as roots, tls.crt and
// tls.key as client certificate. Its errors are the user's to fix.
func externalEtcdTLS(ctx context.Context, r client.Reader, kc *strata.KafkaCluster) (*tls.Config, error) {
	ref := kc.Spec.Metadata.ExternalTLS
	if ref == nil {
		return nil, nil
	}
	var sec corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: ref.Name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("metadata.externalTLS: Secret %s not found", ref.Name)
		}
		return nil, fmt.Errorf("metadata.externalTLS: read Secret %s: %w", ref.Name, err)
	}
	cert, err := tls.X509KeyPair(sec.Data[TLSCertKey], sec.Data[TLSKeyKey])
	if err != nil {
		return nil, fmt.Errorf("metadata.externalTLS: Secret %s: %s and %s: %w", ref.Name, TLSCertKey, TLSKeyKey, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[CACertKey]) {
		return nil, fmt.Errorf("metadata.externalTLS: Secret %s: no CA certificate in %s", ref.Name, CACertKey)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}, nil
}
