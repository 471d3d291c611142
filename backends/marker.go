package backends

import (
	"fmt"
	"regexp"
	"strings"
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

// Marker returns the reservation marker of a claim:
// "<identity>/<namespace>/<name>", or "<namespace>/<name>" without an
// identity. It holds no claim UID, which clusterctl move changes; the
// identity (by default the management cluster's kube-system UID) keeps
// management clusters that share one IPAM system apart.
func Marker(identity, namespace, name string) string {
	if identity == "" {
		return namespace + "/" + name
	}
	return identity + "/" + namespace + "/" + name
}

// SameClaim says whether marker names the claim under any identity, or
// under none (as markers did before identities were on by default). A
// record that a moved claim, or one from before an upgrade, left under such
// a marker is the claim's own when it also holds the address the claim's
// IPAddress has: the address is what no other claim can share.
func SameClaim(marker string, claim Claim) bool {
	suffix := claim.Namespace + "/" + claim.Name
	if marker == suffix {
		return true
	}
	identity, ok := strings.CutSuffix(marker, "/"+suffix)
	return ok && identity != "" && ValidateIdentity(identity) == nil
}
