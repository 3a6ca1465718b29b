package cmd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/strata-dev/strata/internal/bench"
)

// clientSecurityFlags are the SASL_SSL settings of `strata bench
// --bootstrap` and `strata verify` towards a secured cluster, e.g. one the
// operator made (SASL_SSL by default) with a KafkaUser Secret mounted:
//
//	--sasl-username-file /etc/kafka-user/username --sasl-password-file /etc/kafka-user/password
//	--sasl-mechanism SCRAM-SHA-512 --tls-ca-file /etc/kafka-ca/ca.crt
//
// Files rather than values so that passwords stay out of process lists
// and pod specs.
type clientSecurityFlags struct {
	caFile, mechanism, user, userFile, passwordFile string
}

func (f *clientSecurityFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.caFile, "tls-ca-file", "", "connect with TLS, trusting the CA certificates of this PEM file (SASL_SSL: with --sasl-*)")
	fl.StringVar(&f.mechanism, "sasl-mechanism", "SCRAM-SHA-512", "SASL mechanism with --sasl-username: SCRAM-SHA-512 or SCRAM-SHA-256")
	fl.StringVar(&f.user, "sasl-username", "", "SASL user (SASL_SSL; needs --tls-ca-file and --sasl-password-file)")
	fl.StringVar(&f.userFile, "sasl-username-file", "", "read the SASL user from this file (e.g. a KafkaUser Secret's username key)")
	fl.StringVar(&f.passwordFile, "sasl-password-file", "", "read the SASL password from this file (e.g. a KafkaUser Secret's password key)")
}

// security returns the client settings, nil for PLAINTEXT (no flag set).
func (f *clientSecurityFlags) security() (*bench.ClientSecurity, error) {
	if f.caFile == "" && f.user == "" && f.userFile == "" && f.passwordFile == "" {
		return nil, nil
	}
	user := f.user
	if f.userFile != "" {
		b, err := os.ReadFile(f.userFile)
		if err != nil {
			return nil, fmt.Errorf("--sasl-username-file: %w", err)
		}
		user = strings.TrimSpace(string(b))
	}
	if f.caFile == "" || user == "" || f.passwordFile == "" {
		return nil, errors.New("SASL_SSL needs --tls-ca-file, --sasl-username (or --sasl-username-file) and --sasl-password-file together")
	}
	if f.mechanism != "SCRAM-SHA-512" && f.mechanism != "SCRAM-SHA-256" {
		return nil, fmt.Errorf("--sasl-mechanism %q: want SCRAM-SHA-512 or SCRAM-SHA-256", f.mechanism)
	}
	pw, err := os.ReadFile(f.passwordFile)
	if err != nil {
		return nil, fmt.Errorf("--sasl-password-file: %w", err)
	}
	// A mounted Secret key has no trailing newline; a file written by
	// hand often has one, which is never part of a generated password.
	return &bench.ClientSecurity{CAFile: f.caFile, Mechanism: f.mechanism, User: user, Password: strings.TrimRight(string(pw), "\r\n")}, nil
}
