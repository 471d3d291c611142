package infoblox

import (
	"crypto/tls"
	"fmt"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// What CheckCredentials finds wrong; each is an ErrInvalidConfig, so that a
// caller naming its own fields (the Secret's keys) can tell them apart.
var (
	ErrBothCredentials = fmt.Errorf("%w: give either a username and password or a client certificate and key, not both", backends.ErrInvalidConfig)
	ErrPartialPassword = fmt.Errorf("%w: a username needs a password and a password a username", backends.ErrInvalidConfig)
	ErrPartialCert     = fmt.Errorf("%w: a client certificate needs its key and a key its certificate", backends.ErrInvalidConfig)
	ErrNoCredentials   = fmt.Errorf("%w: no credentials: give a username and password or a client certificate and key", backends.ErrInvalidConfig)
	ErrBadKeyPair      = fmt.Errorf("%w: the client certificate and key do not form a PEM key pair", backends.ErrInvalidConfig)
)

// CheckCredentials is the one rule for an Infoblox pool's credentials: a
// username and password, or a client certificate and its key (PEM, a pair
// that parses), never both and never half. infoblox-go-client would
// log.Fatal on a pair that does not parse, killing the manager; here it is
// a configuration error of the pool. The error wraps one of the Err*
// values above and, for a bad pair, the parser's reason (which names no key
// material).
func CheckCredentials(username, password string, clientCert, clientKey []byte) error {
	basic := username != "" || password != ""
	cert := len(clientCert) > 0 || len(clientKey) > 0
	switch {
	case basic && cert:
		return ErrBothCredentials
	case basic && (username == "" || password == ""):
		return ErrPartialPassword
	case cert && (len(clientCert) == 0 || len(clientKey) == 0):
		return ErrPartialCert
	case !basic && !cert:
		return ErrNoCredentials
	}
	if !cert {
		return nil
	}
	if _, err := tls.X509KeyPair(clientCert, clientKey); err != nil {
		return fmt.Errorf("%w: %w", ErrBadKeyPair, err)
	}
	return nil
}
