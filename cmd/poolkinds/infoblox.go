package poolkinds

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// infobloxPool is implemented by both Infoblox pool kinds.
type infobloxPool interface {
	poolkind.Pool
	GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
}

// Infoblox is the Infoblox pool kinds: InfobloxIPPool and GlobalInfobloxIPPool.
// Their backends share limits, which must not be nil; the manager takes
// its kinds from All.
func Infoblox(limits *backendhttp.Limits) poolkind.Kinds {
	secretName := func(p poolkind.Pool) string {
		return p.(infobloxPool).GetInfobloxSpec().Connection.CredentialsSecretRef.Name
	}
	rateLimit := func(p poolkind.Pool) *v1alpha1.RateLimit {
		return p.(infobloxPool).GetInfobloxSpec().Connection.RateLimit
	}
	kind := poolkind.Kind{Backend: "infoblox", SecretName: secretName, Endpoint: infobloxEndpoint, InsecureConnection: infobloxInsecure, WantsMAC: infobloxWantsMAC, Spans: infobloxSpans,
		Records: infobloxRecords}
	kinds := twins(limited(kind, limits, rateLimit, newInfobloxBackend),
		"InfobloxIPPool",
		func() poolkind.Pool { return &v1alpha1.InfobloxIPPool{} }, func() poolkind.Pool { return &v1alpha1.GlobalInfobloxIPPool{} },
		func() client.ObjectList { return &v1alpha1.InfobloxIPPoolList{} }, func() client.ObjectList { return &v1alpha1.GlobalInfobloxIPPoolList{} })
	// Only a namespaced pool parents a cluster's subnet: its nodes pool
	// is made beside it, with its credentials Secret.
	kinds[0].CanParent = infobloxCanParent
	kinds[0].ChildPool = infobloxChildPool
	return kinds
}

// infobloxEndpoint is the grid's URL: WAPI is served over https only.
// infobloxRecords: a carving pool's records are networks, another's fixed
// addresses or host records, as its reservation says.
func infobloxRecords(p poolkind.Pool) string {
	spec := p.(infobloxPool).GetInfobloxSpec()
	switch {
	case spec.ChildPrefixes != nil:
		return "network"
	case spec.Reservation.ObjectType == v1alpha1.InfobloxHostRecord:
		return "record:host"
	}
	return "fixedaddress"
}

func infobloxEndpoint(p poolkind.Pool) string {
	c := p.(infobloxPool).GetInfobloxSpec().Connection
	port := c.Port
	if port == 0 {
		port = 443
	}
	return "https://" + net.JoinHostPort(c.Host, strconv.Itoa(int(port)))
}

func infobloxInsecure(p poolkind.Pool) string {
	c := p.(infobloxPool).GetInfobloxSpec().Connection
	return insecureConnection(false, c.InsecureSkipTLSVerify)
}

// newInfobloxBackend turns an Infoblox pool and its Secret into a backend.
func newInfobloxBackend(pool poolkind.Pool, secret *corev1.Secret, opts poolkind.BackendOptions, limits *backendhttp.Limits) (backends.Backend, error) {
	spec := pool.(infobloxPool).GetInfobloxSpec()
	creds, err := infobloxCredentials(secret)
	if err != nil {
		return nil, err
	}
	cfg := infoblox.Config{
		Host:                  spec.Connection.Host,
		Port:                  int(spec.Connection.Port),
		WAPIVersion:           spec.Connection.WAPIVersion,
		Username:              creds.username,
		Password:              creds.password,
		ClientCert:            creds.cert,
		ClientKey:             creds.key,
		CABundle:              creds.ca,
		InsecureSkipTLSVerify: spec.Connection.InsecureSkipTLSVerify,
		NetworkView:           spec.NetworkView,
		PrefixLength:          int(ptrValue(spec.PrefixLength)),
		Reservation: infoblox.Reservation{
			ObjectType:           infoblox.ObjectType(spec.Reservation.ObjectType),
			NamePattern:          spec.Reservation.NamePattern,
			CommentPattern:       spec.Reservation.CommentPattern,
			ExtensibleAttributes: spec.Reservation.ExtensibleAttributes,
		},
		HTTP:      infoblox.HTTPOptions{Timeout: opts.RequestTimeout, Observe: opts.Observe("infoblox"), Limits: limits},
		Batch:     backends.BatchOptions{MaxSize: opts.MaxBatchSize, Observe: observeBatches(opts, "infoblox")},
		Uncertain: opts.Uncertain,
	}
	if p := spec.Planned; p != nil {
		cfg.Planned = &infoblox.Planned{ExtensibleAttribute: p.ExtensibleAttribute}
	}
	if c := spec.ChildPrefixes; c != nil {
		cfg.ChildPrefixLength = int(c.Length)
	}
	if dns := spec.Reservation.DNS; dns != nil {
		cfg.Reservation.DNS = &infoblox.DNS{Zone: dns.Zone, View: dns.View}
	}
	gateway, err := gatewayConfig(spec.Gateway)
	if err != nil {
		return nil, err
	}
	cfg.Gateway = gateway
	for i, s := range spec.Sources {
		src, err := infobloxSource(s)
		if err != nil {
			return nil, fmt.Errorf("%w: sources[%d]: %v", backends.ErrInvalidConfig, i, err)
		}
		cfg.Sources = append(cfg.Sources, src)
	}
	return infoblox.New(cfg)
}

type infobloxSecret struct {
	username, password string
	cert, key, ca      []byte
}

// infobloxCredentials reads and checks the Secret's keys. A client
// certificate that does not parse is reported here, on the pool: handed to
// infoblox-go-client's own transport it would end the process.
func infobloxCredentials(secret *corev1.Secret) (infobloxSecret, error) {
	s := infobloxSecret{
		username: strings.TrimSpace(string(secret.Data[v1alpha1.InfobloxUsernameKey])),
		password: string(secret.Data[v1alpha1.InfobloxPasswordKey]),
		cert:     secret.Data[v1alpha1.InfobloxClientCertKey],
		key:      secret.Data[v1alpha1.InfobloxClientKeyKey],
		ca:       secret.Data[v1alpha1.CABundleKey],
	}
	invalid := func(format string, args ...any) error {
		return &poolkind.UnusablePoolError{Reason: v1alpha1.InvalidCredentialsSecretReason,
			Message: fmt.Sprintf("Secret %s/%s: %s", secret.Namespace, secret.Name, fmt.Sprintf(format, args...))}
	}
	// The backend holds the rule; here it is said in the Secret's keys.
	u, pw := fmt.Sprintf("%q", v1alpha1.InfobloxUsernameKey), fmt.Sprintf("%q", v1alpha1.InfobloxPasswordKey)
	c, k := fmt.Sprintf("%q", v1alpha1.InfobloxClientCertKey), fmt.Sprintf("%q", v1alpha1.InfobloxClientKeyKey)
	switch err := infoblox.CheckCredentials(s.username, s.password, s.cert, s.key); {
	case err == nil:
	case errors.Is(err, infoblox.ErrBothCredentials):
		return s, invalid("holds both %s/%s and %s/%s; keep one way to authenticate", u, pw, c, k)
	case errors.Is(err, infoblox.ErrPartialPassword):
		return s, invalid("needs both %s and %s", u, pw)
	case errors.Is(err, infoblox.ErrPartialCert):
		return s, invalid("needs both %s and %s", c, k)
	case errors.Is(err, infoblox.ErrNoCredentials):
		return s, invalid("has neither %s and %s nor %s and %s", u, pw, c, k)
	default:
		// The parse error names no key material.
		return s, invalid("%s and %s are not a PEM certificate and matching key: %v", c, k, strings.TrimPrefix(err.Error(), infoblox.ErrBadKeyPair.Error()+": "))
	}
	if len(s.ca) > 0 && !x509.NewCertPool().AppendCertsFromPEM(s.ca) {
		return s, invalid("%q holds no PEM certificate", v1alpha1.CABundleKey)
	}
	return s, nil
}

func infobloxSource(s v1alpha1.InfobloxAddressSource) (infoblox.Source, error) {
	switch {
	case s.Network != nil:
		p, err := netip.ParsePrefix(s.Network.CIDR)
		if err != nil {
			return infoblox.Source{}, fmt.Errorf("network %q: %v", s.Network.CIDR, err)
		}
		return infoblox.Source{Network: p}, nil
	case s.Range != nil:
		start, err := netip.ParseAddr(s.Range.Start)
		if err != nil {
			return infoblox.Source{}, fmt.Errorf("range start %q: %v", s.Range.Start, err)
		}
		end, err := netip.ParseAddr(s.Range.End)
		if err != nil {
			return infoblox.Source{}, fmt.Errorf("range end %q: %v", s.Range.End, err)
		}
		return infoblox.Source{Start: start, End: end}, nil
	}
	return infoblox.Source{}, fmt.Errorf("neither network nor range is set")
}

// infobloxWantsMAC says whether the pool's fixed addresses carry the
// machine's MAC. Only IPv4 fixed addresses do (an IPv6 one matches a DUID),
// so a pool of IPv6 sources alone has its claims wait for no MAC.
func infobloxWantsMAC(pool poolkind.Pool) bool {
	spec := pool.(infobloxPool).GetInfobloxSpec()
	return spec.Reservation.MACAddress == v1alpha1.InfobloxMACMachine && slices.ContainsFunc(spec.Sources, isIPv4Source)
}

// isIPv4Source says whether an Infoblox source gives IPv4 addresses.
func isIPv4Source(s v1alpha1.InfobloxAddressSource) bool {
	switch {
	case s.Network != nil:
		prefix, err := netip.ParsePrefix(s.Network.CIDR)
		return err == nil && prefix.Addr().Is4()
	case s.Range != nil:
		start, err := netip.ParseAddr(s.Range.Start)
		return err == nil && start.Is4()
	}
	return false
}

// infobloxSpans are the addresses of the pool's sources, as its spec names
// them.
func infobloxSpans(pool poolkind.Pool) ([]netipx.IPRange, bool) {
	return spansOf(pool.(infobloxPool).GetInfobloxSpec().Sources, func(s v1alpha1.InfobloxAddressSource) netipx.IPRange {
		switch {
		case s.Network != nil:
			return prefixSpan(s.Network.CIDR)
		case s.Range != nil:
			return rangeSpan(s.Range.Start, s.Range.End)
		}
		return netipx.IPRange{}
	})
}
