package poolkinds

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
)

// infobloxPool is implemented by both Infoblox pool kinds.
type infobloxPool interface {
	controllers.Pool
	GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
}

// Infoblox is the Infoblox pool kinds: InfobloxIPPool and GlobalInfobloxIPPool.
func Infoblox() controllers.PoolKinds {
	secretName := func(p controllers.Pool) string {
		return p.(infobloxPool).GetInfobloxSpec().Connection.CredentialsSecretRef.Name
	}
	rateLimit := func(p controllers.Pool) *v1alpha1.RateLimit {
		return p.(infobloxPool).GetInfobloxSpec().Connection.RateLimit
	}
	return controllers.PoolKinds{
		{
			Kind: "InfobloxIPPool", Namespaced: true, Backend: "infoblox",
			New:                func() controllers.Pool { return &v1alpha1.InfobloxIPPool{} },
			NewList:            func() client.ObjectList { return &v1alpha1.InfobloxIPPoolList{} },
			SecretName:         secretName,
			RateLimit:          rateLimit,
			InsecureConnection: infobloxInsecure,
			NewBackend:         newInfobloxBackend,
		},
		{
			Kind: "GlobalInfobloxIPPool", Namespaced: false, Backend: "infoblox",
			New:                func() controllers.Pool { return &v1alpha1.GlobalInfobloxIPPool{} },
			NewList:            func() client.ObjectList { return &v1alpha1.GlobalInfobloxIPPoolList{} },
			SecretName:         secretName,
			RateLimit:          rateLimit,
			InsecureConnection: infobloxInsecure,
			NewBackend:         newInfobloxBackend,
		},
	}
}

func infobloxInsecure(p controllers.Pool) string {
	c := p.(infobloxPool).GetInfobloxSpec().Connection
	return insecureConnection(false, c.InsecureSkipTLSVerify)
}

// newInfobloxBackend turns an Infoblox pool and its Secret into a backend.
func newInfobloxBackend(pool controllers.Pool, secret *corev1.Secret, opts controllers.BackendOptions) (backends.Backend, error) {
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
		HTTP:  infoblox.HTTPOptions{Timeout: opts.RequestTimeout, Observe: opts.Observe("infoblox"), Limits: opts.Limits},
		Batch: backends.BatchOptions{MaxSize: opts.MaxBatchSize},
	}
	if dns := spec.Reservation.DNS; dns != nil {
		cfg.Reservation.DNS = &infoblox.DNS{Zone: dns.Zone, View: dns.View}
	}
	gateway, err := gatewayConfig(spec.Gateway)
	if err != nil {
		return nil, err
	}
	cfg.Gateway = infoblox.Gateway{Address: gateway.Address, None: gateway.None}
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
		return &controllers.SecretError{Reason: v1alpha1.InvalidCredentialsSecretReason,
			Message: fmt.Sprintf("Secret %s/%s: %s", secret.Namespace, secret.Name, fmt.Sprintf(format, args...))}
	}
	basic := s.username != "" || s.password != ""
	cert := len(s.cert) > 0 || len(s.key) > 0
	switch {
	case basic && cert:
		return s, invalid("holds both %q/%q and %q/%q; keep one way to authenticate",
			v1alpha1.InfobloxUsernameKey, v1alpha1.InfobloxPasswordKey, v1alpha1.InfobloxClientCertKey, v1alpha1.InfobloxClientKeyKey)
	case basic && (s.username == "" || s.password == ""):
		return s, invalid("needs both %q and %q", v1alpha1.InfobloxUsernameKey, v1alpha1.InfobloxPasswordKey)
	case cert && (len(s.cert) == 0 || len(s.key) == 0):
		return s, invalid("needs both %q and %q", v1alpha1.InfobloxClientCertKey, v1alpha1.InfobloxClientKeyKey)
	case !basic && !cert:
		return s, invalid("has neither %q and %q nor %q and %q",
			v1alpha1.InfobloxUsernameKey, v1alpha1.InfobloxPasswordKey, v1alpha1.InfobloxClientCertKey, v1alpha1.InfobloxClientKeyKey)
	}
	if cert {
		if _, err := tls.X509KeyPair(s.cert, s.key); err != nil {
			// The parse error names no key material.
			return s, invalid("%q and %q are not a PEM certificate and matching key: %v",
				v1alpha1.InfobloxClientCertKey, v1alpha1.InfobloxClientKeyKey, err)
		}
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
