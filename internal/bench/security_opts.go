package bench

import "github.com/twmb/franz-go/pkg/kgo"

// KgoOpts are the franz-go options of s: TLS trusting s.CAFile and SASL
// SCRAM as s.User (none for nil). `strata verify` uses them too.
func (s *ClientSecurity) KgoOpts() ([]kgo.Opt, error) { return s.kgoOpts() }
