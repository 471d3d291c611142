package backends

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// HTTPClient is the client a backend's requests go through: retrying and
// limited as o says, trusting caBundle (the system roots when empty),
// presenting certs. A CA bundle that does not parse fails closed, where a
// client library would turn verification off.
func HTTPClient(o backendhttp.Options, caBundle []byte, insecureSkipTLSVerify bool, certs []tls.Certificate) (*http.Client, error) {
	tlsConfig, err := backendhttp.TLSConfig(caBundle, insecureSkipTLSVerify)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	tlsConfig.Certificates = certs
	return backendhttp.NewClient(o, tlsConfig), nil
}
