package auth

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// Principal is an authenticated identity in Kafka's form "User:<name>".
type Principal string

// Anonymous is the principal of connections on PLAINTEXT and SSL listeners
// without a client certificate (Kafka's User:ANONYMOUS).
const Anonymous Principal = "User:ANONYMOUS"

// UserPrincipal returns "User:<name>".
func UserPrincipal(name string) Principal { return Principal("User:" + name) }

// Name returns the part after "User:".
func (p Principal) Name() string { return strings.TrimPrefix(string(p), "User:") }

// MappingRules are ssl.principal.mapping.rules: a comma-separated list of
// RULE:pattern/replacement/[LU] and DEFAULT, tried in order on the client
// certificate's subject (RFC 2253 string, e.g. "CN=alice,OU=eng,O=acme");
// the first rule whose pattern matches the whole subject gives the name
// (replacement with $1.. groups, then lower- or upper-cased with L or U);
// DEFAULT gives the subject unchanged. No rule matching is an error (the
// connection is refused), as in Kafka.
type MappingRules struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	re          *regexp.Regexp
	replacement string
	caseFold    byte // 0, 'L' or 'U'
}

// ParseMappingRules parses ssl.principal.mapping.rules; "" is DEFAULT.
func ParseMappingRules(s string) (MappingRules, error) {
	var out MappingRules
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		rest = strings.TrimLeft(rest, " \t\n,")
		if rest == "" {
			break
		}
		if after, ok := strings.CutPrefix(rest, "DEFAULT"); ok {
			out.rules = append(out.rules, mappingRule{isDefault: true})
			rest = after
			continue
		}
		after, ok := strings.CutPrefix(rest, "RULE:")
		if !ok {
			return MappingRules{}, fmt.Errorf("ssl.principal.mapping.rules: want DEFAULT or RULE:pattern/replacement/[LU] at %q", rest)
		}
		// pattern/replacement/ with "\/" escaping a slash.
		parts := make([]string, 0, 2)
		var cur strings.Builder
		i := 0
		for ; i < len(after) && len(parts) < 2; i++ {
			switch {
			case after[i] == '\\' && i+1 < len(after) && after[i+1] == '/':
				cur.WriteByte('/')
				i++
			case after[i] == '/':
				parts = append(parts, cur.String())
				cur.Reset()
			default:
				cur.WriteByte(after[i])
			}
		}
		if len(parts) < 2 {
			return MappingRules{}, fmt.Errorf("ssl.principal.mapping.rules: unterminated rule %q (want RULE:pattern/replacement/)", "RULE:"+after)
		}
		re, err := regexp.Compile("^(?:" + parts[0] + ")$")
		if err != nil {
			return MappingRules{}, fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %w", parts[0], err)
		}
		r := mappingRule{re: re, replacement: parts[1]}
		after = after[i:]
		if len(after) > 0 && (after[0] == 'L' || after[0] == 'U') {
			r.caseFold = after[0]
			after = after[1:]
		}
		out.rules = append(out.rules, r)
		rest = after
	}
	return out, nil
}

// Principal maps a certificate subject to a principal.
func (m MappingRules) Principal(subject string) (Principal, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return UserPrincipal(subject), nil
		}
		if !r.re.MatchString(subject) {
			continue
		}
		name := r.re.ReplaceAllString(subject, r.replacement)
		switch r.caseFold {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return UserPrincipal(name), nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule matches the certificate subject %q", subject)
}

// CertificatePrincipal maps the subject of a verified client certificate.
func (m MappingRules) CertificatePrincipal(cert *x509.Certificate) (Principal, error) {
	return m.Principal(cert.Subject.String())
}
