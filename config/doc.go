// Package config holds the operator's kustomize configuration (crd, rbac,
// manager, default, samples, manifests). It has no Go code of its own; its
// test renders config/default with the kustomize binary the Makefile
// builds and checks the objects a `kubectl apply -k config/default` would
// create.
package config
