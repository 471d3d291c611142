#!/usr/bin/env bash
# Builds the manager of the in-cluster IPAM provider (the bench's yardstick,
# docs/bench.md) from the nested module test/incluster, whose go.mod pins it
# as a tool with its own dependencies (Cluster API v1.11): the provider's
# go.mod never takes on a test-only consumer's dependencies, and no module
# version list is needed. The binary is cached outside the checkout.
#
# Prints the binary's path on stdout; with --crds, the directory of the
# provider's CRDs in the module cache instead; with --version, the version
# (pinned in test/incluster/go.mod alone). Progress goes to stderr.
set -euo pipefail

MODULE="sigs.k8s.io/cluster-api-ipam-provider-in-cluster"
TOOL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/incluster" && pwd)"
VERSION="$(sed -n "s|^[[:space:]]*$MODULE \(v[^ ]*\).*|\1|p" "$TOOL_DIR/go.mod")"
[[ -n "$VERSION" ]] || { echo "no version of $MODULE in $TOOL_DIR/go.mod" >&2; exit 1; }
CACHE_ROOT="${INCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/incluster}"
BIN_DIR="$CACHE_ROOT/$VERSION"
BIN="$BIN_DIR/cluster-api-ipam-provider-in-cluster"

export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
cd "$TOOL_DIR"

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

echo ">> building $MODULE@$VERSION (a cold build takes a few minutes)" >&2
staging="$(mktemp -d "$CACHE_ROOT/.staging.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
go build -trimpath -ldflags "-s -w" -o "$staging/cluster-api-ipam-provider-in-cluster" "$MODULE"
rm -rf "$BIN_DIR"
mv "$staging" "$BIN_DIR"
echo ">> in-cluster provider cached in $BIN_DIR" >&2
echo "$BIN"
