package backends

import (
	"fmt"
	"regexp"
	"strings"
	"time"
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

// Holds says whether a record carrying marker is the claim's: it carries
// the claim's marker, or the exact marker the claim's reservation was
// recorded under (Claim.Recorded: the claim's marker in the management
// cluster it was moved from by clusterctl move), or, for a claim whose
// reservation recorded none (made before markers were recorded), the
// claim's marker without identity (from before identities were on by
// default). A record of the same namespace and name under any other
// identity is another management cluster's, which may well have claims of
// the same names: it is never the claim's.
func (c Claim) Holds(marker string) bool {
	switch {
	case marker == "":
		return false
	case marker == c.Marker:
		return true
	case c.Recorded != "":
		return marker == c.Recorded
	}
	return marker == c.Namespace+"/"+c.Name
}

// tombstoneSeparator ends a claim's marker in a tombstone; '@' appears in no
// namespace, name or identity, so a tombstone never names a claim.
const tombstoneSeparator = "@released="

// TombstoneMarker is the marker of a record released at at and kept, for a
// pool's grace period, so that its address is not handed out again while
// switches may still remember the machine that had it.
func TombstoneMarker(marker string, at time.Time) string {
	return marker + tombstoneSeparator + at.UTC().Format(time.RFC3339)
}

// ParseTombstone returns the claim marker and release time of a tombstone
// marker; ok is false for any other marker.
func ParseTombstone(marker string) (claimMarker string, at time.Time, ok bool) {
	claimMarker, stamp, found := strings.Cut(marker, tombstoneSeparator)
	if !found {
		return "", time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return "", time.Time{}, false
	}
	return claimMarker, at, true
}

// IsTombstoneOf says whether marker is a tombstone of claimMarker: the
// claim's record was already retired.
func IsTombstoneOf(marker, claimMarker string) bool {
	m, _, ok := ParseTombstone(marker)
	return ok && m == claimMarker
}

// ParseMarker splits "<identity>/<namespace>/<name>" for the given
// identity; ok is false for markers of another identity and for tombstones.
func ParseMarker(identity, marker string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(marker, identity+"/")
	if !found || identity == "" {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, "/")
	if !found || namespace == "" || name == "" || strings.ContainsAny(name, "/@") {
		return "", "", false
	}
	return namespace, name, true
}

// plannedSeparator ends a claim's marker on a record the IPAM team planned
// and the claim adopted: the record itself says that it was planned, so a
// release (by any manager, after any restart or clusterctl move) returns it
// to the IPAM team instead of deleting it. '#' appears in no namespace,
// name or identity.
const plannedSeparator = "#planned"

// PlannedMarker is the value a claim writes on a planned record it adopts:
// its marker, and that the record was planned.
func PlannedMarker(marker string) string { return marker + plannedSeparator }

// ParsePlanned splits a stored marker value: the claim's marker, and
// whether the record was planned. Any other value is its own marker.
func ParsePlanned(value string) (marker string, planned bool) {
	marker, found := strings.CutSuffix(value, plannedSeparator)
	if !found || marker == "" {
		return value, false
	}
	return marker, true
}
