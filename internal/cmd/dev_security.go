package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/devcerts"
)

// devSecurity is what `strata dev --security` set up: one SASL_SSL
// listener per broker (also the inter-broker listener), certificates from
// a CA generated into the data dir, two SCRAM users in etcd (the brokers'
// own and one for clients), and ACLs enforced with both users as super
// users, so the printed user may do everything, grant ACLs to others
// included.
type devSecurity struct {
	caFile   string
	user     string
	password string
}

const (
	devClientUser = "admin"
	devBrokerUser = "strata-broker"
)

// setupDevSecurity writes <root>/security/{ca,broker}.{crt,key}, stores the
// users' SCRAM-SHA-256 and -512 credentials (salted; the passwords are
// random and printed once) and sets the brokers' listener settings.
func setupDevSecurity(ctx context.Context, base *server.Config, root, host string, endpoints []string) (*devSecurity, error) {
	dir := filepath.Join(root, "security")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := devcerts.NewCA(dir, "ca", "strata dev CA")
	if err != nil {
		return nil, err
	}
	hosts := []string{"127.0.0.1", "localhost", "::1"}
	if host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	cert, key, err := ca.Issue(dir, "broker", devcerts.Options{Hosts: hosts})
	if err != nil {
		return nil, err
	}
	store, err := meta.Connect(ctx, meta.ClientConfig{Endpoints: endpoints, Cluster: base.Cluster.Name})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	sec := &devSecurity{caFile: ca.CertFile, user: devClientUser, password: randomSecret()}
	brokerPassword := randomSecret()
	for user, password := range map[string]string{sec.user: sec.password, devBrokerUser: brokerPassword} {
		creds := map[auth.Mechanism]auth.Credential{}
		for _, m := range auth.Mechanisms {
			c, err := auth.NewCredential(m, password, auth.MinIterations)
			if err != nil {
				return nil, err
			}
			creds[m] = c
		}
		if err := store.AlterScram(ctx, user, creds, nil); err != nil {
			return nil, fmt.Errorf("create SCRAM user %s: %w", user, err)
		}
	}
	listen := base.Listen
	if _, err := server.ApplySettings(base, map[string]string{
		"listeners":                            "SASL_SSL://" + listen,
		"ssl.certificate.location":             cert,
		"ssl.key.location":                     key,
		"ssl.ca.location":                      ca.CertFile,
		"sasl.enabled.mechanisms":              "SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
		"inter.broker.sasl.username":           devBrokerUser,
		"inter.broker.sasl.password":           brokerPassword,
		"authorizer.class.name":                "strata.acl",
		"super.users":                          "User:" + devClientUser + ";User:" + devBrokerUser,
	}); err != nil {
		return nil, err
	}
	base.Listen = listen
	return sec, nil
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// line is printed before the ready line.
func (s *devSecurity) line() string {
	return fmt.Sprintf("strata dev security: ca=%s mechanism=SCRAM-SHA-512 user=%s password=%s", s.caFile, s.user, s.password)
}
