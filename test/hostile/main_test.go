package hostile

import (
	"testing"

	"github.com/strata-dev/strata/broker/brokertest"
)

func TestMain(m *testing.M) {
	brokertest.Main(m)
}
