#!/usr/bin/env bash
# Installs the manager of the in-cluster IPAM provider (the bench's yardstick,
# docs/bench.md) with `go install pkg@version` and caches it outside the
# checkout. go install builds it against its own go.mod (CAPI v1.11), so the
# provider's go.mod never takes on a test-only consumer's dependencies.
#
# Prints the binary's path on stdout; with --crds, the directory of the
# provider's CRDs in the module cache instead; with --version, the version
# (pinned here alone). Progress goes to stderr.
set -euo pipefail

MODULE="sigs.k8s.io/cluster-api-ipam-provider-in-cluster"
VERSION="${INCLUSTER_VERSION:-v1.1.0}"
CACHE_ROOT="${INCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/incluster}"
BIN_DIR="$CACHE_ROOT/$VERSION"
BIN="$BIN_DIR/cluster-api-ipam-provider-in-cluster"

export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
# go install pkg@version reads the module's version list to look for a
# deprecation notice, and our proxy refuses that list for this module (403);
# the module cache, tried first, serves the list of the versions it holds.
export GOPROXY="file://$(go env GOMODCACHE)/cache/download,${GOPROXY:-$(go env GOPROXY)}"

if [[ "${1:-}" == "--version" ]]; then
  echo "$VERSION"
  exit 0
fi

if [[ "${1:-}" == "--crds" ]]; then
  # The module cache holds the release's source; its CRDs are those the manager expects.
  dir="$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/config/crd/bases" ]] || { echo "no CRDs in the module cache for $MODULE@$VERSION" >&2; exit 1; }
  echo "$dir/config/crd/bases"
  exit 0
fi

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Two runs starting at once must not build twice in the same place.
exec 9>"$CACHE_ROOT/.lock"
flock 9
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi

echo ">> installing $MODULE@$VERSION (a cold build takes a few minutes)" >&2
staging="$(mktemp -d "$CACHE_ROOT/.staging.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
GOBIN="$staging" go install -trimpath -ldflags "-s -w" "$MODULE@$VERSION"
rm -rf "$BIN_DIR"
mv "$staging" "$BIN_DIR"
echo ">> in-cluster provider cached in $BIN_DIR" >&2
echo "$BIN"
