package backends

import (
	"fmt"
	"regexp"
)

// identityPattern keeps identities readable in the IPAM system and free of
// the separator.
var identityPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ValidateIdentity checks a management cluster identity for use in markers.
func ValidateIdentity(identity string) error {
	if identity == "" || identityPattern.MatchString(identity) {
		return nil
	}
	return fmt.Errorf("identity %q must be lower-case letters, digits, '-' and '.', at most 63 characters", identity)
}

// Marker returns the reservation marker of a claim: "<namespace>/<name>",
// prefixed by "<identity>/" when the operator set an identity for this
// management cluster. It holds no UID because UIDs change on clusterctl move,
// while namespace and name do not; the identity keeps management clusters that
// share one IPAM system apart.
func Marker(identity, namespace, name string) string {
	if identity == "" {
		return namespace + "/" + name
	}
	return identity + "/" + namespace + "/" + name
}
