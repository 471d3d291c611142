package poolkinds

import (
	"fmt"
	"net/netip"
	"strings"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// netboxPool is implemented by both NetBox pool kinds.
type netboxPool interface {
	poolkind.Pool
	GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
}

// NetBox is the NetBox pool kinds: NetboxIPPool and GlobalNetboxIPPool.
// Their backends share limits, which must not be nil; the manager takes
// its kinds from All.
func NetBox(limits *backendhttp.Limits) poolkind.Kinds {
	secretName := func(p poolkind.Pool) string {
		return p.(netboxPool).GetNetboxSpec().Connection.CredentialsSecretRef.Name
	}
	rateLimit := func(p poolkind.Pool) *v1alpha1.RateLimit {
		return p.(netboxPool).GetNetboxSpec().Connection.RateLimit
	}
	kind := poolkind.Kind{Backend: "netbox", SecretName: secretName, Endpoint: netboxEndpoint, InsecureConnection: netboxInsecure, Spans: netboxSpans,
		Records: netboxRecords}
	kinds := twins(limited(kind, limits, rateLimit, newNetboxBackend),
		"NetboxIPPool",
		func() poolkind.Pool { return &v1alpha1.NetboxIPPool{} }, func() poolkind.Pool { return &v1alpha1.GlobalNetboxIPPool{} },
		func() client.ObjectList { return &v1alpha1.NetboxIPPoolList{} }, func() client.ObjectList { return &v1alpha1.GlobalNetboxIPPoolList{} })
	// Only a namespaced pool parents a cluster's subnet: its nodes pool
	// is made beside it, with its credentials Secret.
	kinds[0].CanParent = netboxCanParent
	kinds[0].ChildPool = netboxChildPool
	return kinds
}

// netboxRecords: a carving pool's records are prefixes, another's IP
// addresses.
func netboxRecords(p poolkind.Pool) string {
	if p.(netboxPool).GetNetboxSpec().ChildPrefixes != nil {
		return "prefix"
	}
	return "ip-address"
}

func netboxEndpoint(p poolkind.Pool) string { return p.(netboxPool).GetNetboxSpec().Connection.URL }

func netboxInsecure(p poolkind.Pool) string {
	c := p.(netboxPool).GetNetboxSpec().Connection
	return insecureConnection(strings.HasPrefix(strings.ToLower(c.URL), "http://"), c.InsecureSkipTLSVerify)
}

// newNetboxBackend turns a NetBox pool and its Secret into a backend.
func newNetboxBackend(pool poolkind.Pool, secret *corev1.Secret, opts poolkind.BackendOptions, limits *backendhttp.Limits) (backends.Backend, error) {
	spec := pool.(netboxPool).GetNetboxSpec()
	token := strings.TrimSpace(string(secret.Data[v1alpha1.NetboxTokenKey]))
	if token == "" {
		return nil, &poolkind.UnusablePoolError{Reason: v1alpha1.InvalidCredentialsSecretReason,
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
		HTTP:      netbox.HTTPOptions{Timeout: opts.RequestTimeout, Observe: opts.Observe("netbox"), Limits: limits},
		Batch:     backends.BatchOptions{MaxSize: opts.MaxBatchSize, Observe: observeBatches(opts, "netbox")},
		Uncertain: opts.Uncertain,
	}
	if c := spec.ChildPrefixes; c != nil {
		cfg.ChildPrefixLength = int(c.Length)
		cfg.ChildRole = c.Role
		if s := c.Scope; s != nil {
			cfg.ChildScope = netbox.Scope{Type: netboxScopeTypes[s.Kind], Slug: s.Slug}
		}
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

// netboxSpans are the addresses of the pool's sources, as its spec names
// them: a prefix or range named by ID alone is known only to NetBox.
func netboxSpans(pool poolkind.Pool) ([]netipx.IPRange, bool) {
	return spansOf(pool.(netboxPool).GetNetboxSpec().Sources, func(s v1alpha1.NetboxAddressSource) netipx.IPRange {
		switch {
		case s.Prefix != nil:
			return prefixSpan(s.Prefix.CIDR)
		case s.IPRange != nil:
			return rangeSpan(s.IPRange.Start, s.IPRange.End)
		}
		return netipx.IPRange{}
	})
}

// netboxScopeTypes are NetBox's content types of the API's scope kinds.
var netboxScopeTypes = map[string]string{"Site": "dcim.site", "Location": "dcim.location", "Region": "dcim.region", "SiteGroup": "dcim.sitegroup"}
