package poolkinds

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/shared"
)

// netboxPool is implemented by both NetBox pool kinds.
type netboxPool interface {
	shared.Pool
	GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
}

// NetBox is the NetBox pool kinds: NetboxIPPool and GlobalNetboxIPPool.
func NetBox() shared.PoolKinds {
	secretName := func(p shared.Pool) string {
		return p.(netboxPool).GetNetboxSpec().Connection.CredentialsSecretRef.Name
	}
	rateLimit := func(p shared.Pool) *v1alpha1.RateLimit {
		return p.(netboxPool).GetNetboxSpec().Connection.RateLimit
	}
	return twins(shared.PoolKind{Backend: "netbox", SecretName: secretName, RateLimit: rateLimit, Endpoint: netboxEndpoint, InsecureConnection: netboxInsecure, NewBackend: newNetboxBackend},
		"NetboxIPPool",
		func() shared.Pool { return &v1alpha1.NetboxIPPool{} }, func() shared.Pool { return &v1alpha1.GlobalNetboxIPPool{} },
		func() client.ObjectList { return &v1alpha1.NetboxIPPoolList{} }, func() client.ObjectList { return &v1alpha1.GlobalNetboxIPPoolList{} })
}

func netboxEndpoint(p shared.Pool) string { return p.(netboxPool).GetNetboxSpec().Connection.URL }

func netboxInsecure(p shared.Pool) string {
	c := p.(netboxPool).GetNetboxSpec().Connection
	return insecureConnection(strings.HasPrefix(strings.ToLower(c.URL), "http://"), c.InsecureSkipTLSVerify)
}

// newNetboxBackend turns a NetBox pool and its Secret into a backend.
func newNetboxBackend(pool shared.Pool, secret *corev1.Secret, opts shared.BackendOptions) (backends.Backend, error) {
	spec := pool.(netboxPool).GetNetboxSpec()
	token := strings.TrimSpace(string(secret.Data[v1alpha1.NetboxTokenKey]))
	if token == "" {
		return nil, &shared.UnusablePoolError{Reason: v1alpha1.InvalidCredentialsSecretReason,
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
		HTTP:      netbox.HTTPOptions{Timeout: opts.RequestTimeout, Observe: opts.Observe("netbox"), Limits: opts.Limits},
		Batch:     backends.BatchOptions{MaxSize: opts.MaxBatchSize, Observe: observeBatches(opts, "netbox")},
		Uncertain: opts.Uncertain,
	}
	if p := spec.Planned; p != nil {
		cfg.Planned = &netbox.Planned{Tag: p.Tag, Status: p.Status}
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
