#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kube-controller-manager for envtest from the Go
# module proxy and caches them outside the checkout. The usual envtest download is
# not reachable from our build machines, and a fresh clone on a machine that built
# them once gets them back in well under a second.
#
# kube-controller-manager is only started by suites that ask for it
# (envtestenv.StartWithControllerManager: the garbage collector and the namespace
# controller); a cache built before it was added gets it on the next run.
#
# Prints the directory holding the binaries (for KUBEBUILDER_ASSETS) on stdout;
# progress goes to stderr.
set -euo pipefail

KUBE_VERSION="${ENVTEST_KUBE_VERSION:-1.36.4}"
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.8}"
CACHE_ROOT="${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-api-ipam-provider-bridge/envtest}"
ASSETS="$CACHE_ROOT/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION"

complete() {
  [[ -x "$ASSETS/kube-apiserver" && -x "$ASSETS/etcd" && -x "$ASSETS/kube-controller-manager" ]]
}

if complete; then
  echo "$ASSETS"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Two test runs starting at once must not build twice in the same place.
exec 9>"$CACHE_ROOT/.lock"
flock 9
if complete; then
  echo "$ASSETS"
  exit 0
fi

export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
staging="$work/staging"
mkdir -p "$staging"

minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
staging_version="v0.${KUBE_VERSION#*.}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# kube_module writes, in the current directory, a module that requires
# k8s.io/kubernetes with each staging module replaced by its published version.
kube_module() {
  local upstream_mod
  upstream_mod="$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$upstream_mod" ]] || { echo "cannot read go.mod of k8s.io/kubernetes v$KUBE_VERSION" >&2; exit 1; }
  {
    echo "module envtest.local/$1"
    grep -E '^(go|godebug) ' "$upstream_mod"
    echo "require k8s.io/kubernetes v$KUBE_VERSION"
    echo "replace ("
    # upstream maps each staging module to ./staging/...; the same module is published at v0.Y.Z.
    awk '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s '"$staging_version"'\n", $1, $1 }' "$upstream_mod"
    echo ")"
  } > go.mod
}

build_controller_manager() {
  echo ">> building kube-controller-manager v$KUBE_VERSION (a few more minutes when cold)" >&2
  mkdir -p "$work/controller-manager"
  cd "$work/controller-manager"
  kube_module kube-controller-manager
  go build -trimpath -ldflags "$ldflags" -o "$1" k8s.io/kubernetes/cmd/kube-controller-manager
}

if [[ -x "$ASSETS/kube-apiserver" && -x "$ASSETS/etcd" ]]; then
  # A cache from before kube-controller-manager was added: add it beside the
  # others, renamed into place so that a run using the cache never sees half a file.
  build_controller_manager "$staging/kube-controller-manager"
  cp "$staging/kube-controller-manager" "$ASSETS/.kube-controller-manager.tmp"
  mv "$ASSETS/.kube-controller-manager.tmp" "$ASSETS/kube-controller-manager"
  echo ">> kube-controller-manager added to $ASSETS" >&2
  echo "$ASSETS"
  exit 0
fi

echo ">> building kube-apiserver v$KUBE_VERSION (a cold build takes several minutes)" >&2
mkdir -p "$work/apiserver"
cd "$work/apiserver"
kube_module kube-apiserver
go build -trimpath -ldflags "$ldflags" -o "$staging/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver

build_controller_manager "$staging/kube-controller-manager"

echo ">> building etcd v$ETCD_VERSION" >&2
mkdir -p "$work/etcd"
cd "$work/etcd"
printf 'module envtest.local/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
go build -trimpath -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3

rm -rf "$ASSETS"
mv "$staging" "$ASSETS"
echo ">> envtest binaries cached in $ASSETS" >&2
echo "$ASSETS"
