// Package olm validates the committed OLM bundle (bundle/, written by
// `make bundle`) with the operator-framework API module's own validators,
// the ones `operator-sdk bundle validate` runs, without any binary.
//
// It is a module of its own: the validators build on
// k8s.io/apiextensions-apiserver's validation internals and k8s.io/apiserver
// at the Kubernetes minor the operator-framework API release was built
// against, which must not drag the operator's own module (controller-runtime
// v0.25, k8s v0.37) onto other versions or into the apiserver's dependency
// tree. Run it with `cd test/olm && go test ./...`.
package olm
