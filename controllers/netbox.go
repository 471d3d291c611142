package controllers

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
)

// netboxPool is implemented by both NetBox pool kinds.
type netboxPool interface {
	Pool
	GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
}

// NetboxPoolKinds are the NetBox pool kinds.
func NetboxPoolKinds() PoolKinds {
	secretName := func(p Pool) string { return p.(netboxPool).GetNetboxSpec().Connection.CredentialsSecretRef.Name }
	rateLimit := func(p Pool) *v1alpha1.RateLimit { return p.(netboxPool).GetNetboxSpec().Connection.RateLimit }
	return PoolKinds{
		{
			Kind: "NetboxIPPool", Namespaced: true, Backend: "netbox",
			New:                func() Pool { return &v1alpha1.NetboxIPPool{} },
			NewList:            func() client.ObjectList { return &v1alpha1.NetboxIPPoolList{} },
			SecretName:         secretName,
			RateLimit:          rateLimit,
			InsecureConnection: netboxInsecure,
			NewBackend:         newNetboxBackend,
		},
		{
			Kind: "GlobalNetboxIPPool", Namespaced: false, Backend: "netbox",
			New:                func() Pool { return &v1alpha1.GlobalNetboxIPPool{} },
			NewList:            func() client.ObjectList { return &v1alpha1.GlobalNetboxIPPoolList{} },
			SecretName:         secretName,
			RateLimit:          rateLimit,
			InsecureConnection: netboxInsecure,
			NewBackend:         newNetboxBackend,
		},
	}
}

func netboxInsecure(p Pool) string {
	c := p.(netboxPool).GetNetboxSpec().Connection
	return insecureConnection(strings.HasPrefix(strings.ToLower(c.URL), "http://"), c.InsecureSkipTLSVerify)
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

// newNetboxBackend turns a NetBox pool and its Secret into a backend.
func newNetboxBackend(pool Pool, secret *corev1.Secret, opts BackendOptions) (backends.Backend, error) {
	spec := pool.(netboxPool).GetNetboxSpec()
	token := strings.TrimSpace(string(secret.Data[v1alpha1.NetboxTokenKey]))
	if token == "" {
		return nil, &SecretError{Reason: v1alpha1.InvalidCredentialsSecretReason,
			Message: fmt.Sprintf("Secret %s/%s has no %q key", secret.Namespace, secret.Name, v1alpha1.NetboxTokenKey)}
	}
	cfg := netbox.Config{
		URL:                   spec.Connection.URL,
		Token:                 token,
		CABundle:              secret.Data[v1alpha1.CABundleKey],
		InsecureSkipTLSVerify: spec.Connection.InsecureSkipTLSVerify,
		PrefixLength:          int(ptrValue(spec.PrefixLength)),
		Reservation: netbox.Reservation{
			Status:             spec.Reservation.Status,
			Role:               spec.Reservation.Role,
			TenantSlug:         spec.Reservation.Tenant,
			DNSNamePattern:     spec.Reservation.DNSNamePattern,
			DescriptionPattern: spec.Reservation.DescriptionPattern,
			Tags:               spec.Reservation.Tags,
			CustomFields:       spec.Reservation.CustomFields,
		},
		HTTP:  netbox.HTTPOptions{Timeout: opts.RequestTimeout, Observe: observeRequests("netbox"), Limits: opts.Limits},
		Batch: backends.BatchOptions{MaxSize: opts.MaxBatchSize},
	}
	gateway, err := gatewayConfig(spec.Gateway)
	if err != nil {
		return nil, err
	}
	cfg.Gateway = gateway
	for i, s := range spec.Sources {
		src, err := netboxSource(s)
		if err != nil {
			return nil, fmt.Errorf("%w: sources[%d]: %v", backends.ErrInvalidConfig, i, err)
		}
		cfg.Sources = append(cfg.Sources, src)
	}
	backend, err := netbox.New(cfg)
	if err != nil {
		return nil, err
	}
	return backend, nil
}

func netboxSource(s v1alpha1.NetboxAddressSource) (netbox.Source, error) {
	switch {
	case s.Prefix != nil:
		src := netbox.Source{Kind: netbox.SourcePrefix, ID: ptrValue(s.Prefix.ID), VRF: s.Prefix.VRF}
		if s.Prefix.CIDR != "" {
			p, err := netip.ParsePrefix(s.Prefix.CIDR)
			if err != nil {
				return src, fmt.Errorf("cidr %q: %v", s.Prefix.CIDR, err)
			}
			src.CIDR = p
		}
		return src, nil
	case s.IPRange != nil:
		src := netbox.Source{Kind: netbox.SourceIPRange, ID: ptrValue(s.IPRange.ID), VRF: s.IPRange.VRF}
		if s.IPRange.Start != "" {
			var err error
			if src.Start, err = netip.ParseAddr(s.IPRange.Start); err != nil {
				return src, fmt.Errorf("start %q: %v", s.IPRange.Start, err)
			}
			if src.End, err = netip.ParseAddr(s.IPRange.End); err != nil {
				return src, fmt.Errorf("end %q: %v", s.IPRange.End, err)
			}
		}
		return src, nil
	}
	return netbox.Source{}, fmt.Errorf("neither prefix nor ipRange is set")
}

func gatewayConfig(g v1alpha1.Gateway) (netbox.Gateway, error) {
	if g.Address != "" {
		addr, err := netip.ParseAddr(g.Address)
		if err != nil {
			return netbox.Gateway{}, fmt.Errorf("%w: gateway address %q: %v", backends.ErrInvalidConfig, g.Address, err)
		}
		return netbox.Gateway{Address: addr}, nil
	}
	return netbox.Gateway{None: g.Policy == v1alpha1.GatewayNone}, nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
