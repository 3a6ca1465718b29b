package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
)

// TestQuotaMatches: DescribeClientQuotas' filter components as Kafka's
// ClientQuotaFilter reads them.
func TestQuotaMatches(t *testing.T) {
	s := func(v string) *string { return &v }
	alice := meta.QuotaEntity{{Type: "user", Name: s("alice")}}
	aliceApp := meta.QuotaEntity{{Type: "client-id", Name: s("app")}, {Type: "user", Name: s("alice")}}
	defUser := meta.QuotaEntity{{Type: "user"}}
	comp := func(typ string, m kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: m, Match: name}
	}
	for _, tc := range []struct {
		name   string
		e      meta.QuotaEntity
		filter []kmsg.DescribeClientQuotasRequestComponent
		strict bool
		want   bool
	}{
		{"no filter matches all", aliceApp, nil, false, true},
		{"no filter strict matches none", alice, nil, true, false},
		{"exact name", alice, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, s("alice"))}, true, true},
		{"exact other name", alice, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, s("bob"))}, false, false},
		{"exact not default", defUser, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, s("alice"))}, false, false},
		{"default", defUser, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeDefault, nil)}, true, true},
		{"default not named", alice, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeDefault, nil)}, false, false},
		{"specified is named only", defUser, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeAny, nil)}, false, false},
		{"specified", alice, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeAny, nil)}, false, true},
		{"non-strict allows other types", aliceApp, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, s("alice"))}, false, true},
		{"strict refuses other types", aliceApp, []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, s("alice"))}, true, false},
		{"missing type", alice, []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", kmsg.QuotasMatchTypeAny, nil)}, false, false},
	} {
		if got := quotaMatches(tc.e, tc.filter, tc.strict); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}
