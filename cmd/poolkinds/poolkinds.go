// Package poolkinds adapts each pool kind to its backend: from the pool's
// spec and credentials Secret to the backend's configuration. It is the only
// place that knows both the API and a concrete IPAM system, so that the
// controllers know neither HTTP nor any one system; cmd wires the kinds in.
package poolkinds

import (
	"fmt"
	"net/netip"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/shared"
)

// twins are a backend's two pool kinds, the namespaced one and its
// cluster-scoped Global twin, which differ only in their types and scope.
func twins(base shared.PoolKind, kind string, newPool, newGlobal func() shared.Pool,
	newList, newGlobalList func() client.ObjectList) shared.PoolKinds {
	namespaced, global := base, base
	namespaced.Kind, namespaced.Namespaced, namespaced.New, namespaced.NewList = kind, true, newPool, newList
	global.Kind, global.Namespaced, global.New, global.NewList = "Global"+kind, false, newGlobal, newGlobalList
	return shared.PoolKinds{namespaced, global}
}

// All is every pool kind the manager serves.
func All() shared.PoolKinds {
	return append(NetBox(), Infoblox()...)
}

// insecureConnection describes what a plain-http or unverified connection
// exposes.
func insecureConnection(plainHTTP, skipVerify bool) string {
	switch {
	case plainHTTP:
		return "the connection uses plain http: the credentials and every answer cross the network unencrypted"
	case skipVerify:
		return "insecureSkipTLSVerify is set: any server on the way can pose as the IPAM system and receive the credentials"
	}
	return ""
}

func gatewayConfig(g v1alpha1.Gateway) (backends.Gateway, error) {
	if g.Address != "" {
		addr, err := netip.ParseAddr(g.Address)
		if err != nil {
			return backends.Gateway{}, fmt.Errorf("%w: gateway address %q: %v", backends.ErrInvalidConfig, g.Address, err)
		}
		return backends.Gateway{Address: addr}, nil
	}
	return backends.Gateway{None: g.Policy == v1alpha1.GatewayNone}, nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// observeBatches is the manager's hook for a backend's batch sizes, or none
// when the options carry none (a backend built outside the manager).
func observeBatches(opts shared.BackendOptions, backend string) func(operation string, size int) {
	if opts.ObserveBatch == nil {
		return nil
	}
	return opts.ObserveBatch(backend)
}
