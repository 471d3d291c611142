#!/usr/bin/env bash
# Builds the kube-state-metrics binary from the Go module proxy and caches it
# outside the checkout, for test/kubestatemetrics: it loads the provider's
# custom-resource configuration (config/metrics) as a cluster's
# kube-state-metrics would. `go install pkg@version` cannot be used: it asks
# the proxy for the module's version list, which the proxy here refuses; the
# module is downloaded at its exact version and built as the main module,
# with its own go.mod and go.sum.
#
# Prints the binary's path on stdout; progress goes to stderr.
set -euo pipefail

KSM_VERSION="${KUBE_STATE_METRICS_VERSION:-v2.20.0}"
CACHE_ROOT="${KUBE_STATE_METRICS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/kube-state-metrics}"
BIN="$CACHE_ROOT/$KSM_VERSION/kube-state-metrics"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Two test runs starting at once must not build twice in the same place.
exec 9>"$CACHE_ROOT/.lock"
flock 9
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi

export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
echo "building kube-state-metrics $KSM_VERSION (once; about two minutes on two cores)" >&2
# Outside any module, so that nothing touches the caller's go.mod.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! json="$(cd "$work" && go mod download -json "k8s.io/kube-state-metrics/v2@$KSM_VERSION")"; then
  # The reason is in the answer's "Error" field.
  printf 'could not download k8s.io/kube-state-metrics/v2@%s:\n%s\n' "$KSM_VERSION" "$json" >&2
  exit 1
fi
dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$dir" ]]; then
  printf 'no module directory in the answer for k8s.io/kube-state-metrics/v2@%s:\n%s\n' "$KSM_VERSION" "$json" >&2
  exit 1
fi
mkdir -p "$(dirname "$BIN")"
(cd "$dir" && go build -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
echo "$BIN"
