package controllers_test

import (
	"os"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	. "github.com/onsi/gomega"
)

// make test names a file in STRATA_GINKGO_REPORT: the suite writes its
// Ginkgo JSON report there, from which hack/testreport lists the slowest
// specs and the failed ones with their messages at the end of the output
// (go test -json sees only TestControllers, one test for all specs).
var _ = ReportAfterSuite("JSON report for make test", func(r Report) {
	if path := os.Getenv("STRATA_GINKGO_REPORT"); path != "" {
		Expect(reporters.GenerateJSONReport(r, path)).To(Succeed())
	}
})
