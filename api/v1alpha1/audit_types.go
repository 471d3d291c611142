package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditAnnotation asks for an audit of the pool now: the pool is audited
// whenever the annotation's value differs from status.audit.request, for
// example after `kubectl annotate --overwrite <pool> ipam-bridge.github.io/audit=$(date +%s)`.
const AuditAnnotation = "ipam-bridge.github.io/audit"

// Condition types, reasons and finding types of the audit.
const (
	// AuditedCondition is True when the pool's last audit ran, False when it failed.
	AuditedCondition = "Audited"
	// AuditCleanReason: the last audit found nothing to report.
	AuditCleanReason = "Clean"
	// FindingsReportedReason: the last audit found orphans, duplicates, drift or tombstones (see status.audit).
	FindingsReportedReason = "FindingsReported"
	// AuditFailedReason: the last audit could not list the pool's records.
	AuditFailedReason = "AuditFailed"

	// AddressReservedCondition is set on a bound claim by the audit: False
	// when its record in the IPAM system is gone and another record now
	// holds its address; True again once its record is found.
	AddressReservedCondition = "AddressReserved"
	// ReservedReason: the claim's record holds its address.
	ReservedReason = "Reserved"
	// AddressTakenOverReason: the claim's record is gone and another record holds its address.
	AddressTakenOverReason = "AddressTakenOver"
	// RecordMovedReason: the IPAM team moved the claim's record to another
	// address or scope; the machine's address is held for the claim again.
	RecordMovedReason = "RecordMoved"
	// RecordDeletedReason: the claim's record was deleted in the IPAM
	// system; the audit reserved the machine's address for it again.
	RecordDeletedReason = "RecordDeleted"
)

// OrphanPolicy says what an audit does with an orphan: a record that
// carries this management cluster's marker but whose claim is gone.
// +kubebuilder:validation:Enum=Report;Release
type OrphanPolicy string

const (
	// OrphansReport reports orphans in status, events and metrics only.
	OrphansReport OrphanPolicy = "Report"
	// OrphansRelease also releases orphans that have been orphans for at least minAge.
	OrphansRelease OrphanPolicy = "Release"
)

// DefaultOrphanMinAge is how long a record must have been seen orphaned or
// duplicated before an audit deletes it, when the pool does not say.
const DefaultOrphanMinAge = time.Hour

// Orphans says how the pool's audit treats records without a claim.
type Orphans struct {
	// policy is Report (the default) or Release.
	// +optional
	// +kubebuilder:default=Report
	Policy OrphanPolicy `json:"policy,omitempty"`

	// minAge is how long an audit must have seen a record orphaned (or
	// duplicated) before it deletes it; 1h by default. It keeps a record
	// whose claim moved to another management cluster (clusterctl move)
	// until the new cluster has marked it as its own.
	// +optional
	MinAge *metav1.Duration `json:"minAge,omitempty"`
}

// ReleaseSettings say how the pool releases an address.
type ReleaseSettings struct {
	// gracePeriod keeps a released address's record as a tombstone for this
	// long before an audit deletes it, so that the address is not handed to
	// another machine while switches may still hold the old ARP or ND entry.
	// 0 (the default) deletes the record at once.
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// FindingType names what an audit found.
// +kubebuilder:validation:Enum=Orphan;Duplicate;Restored;Taken;Moved;Stray;Deleted
type FindingType string

const (
	// FindingOrphan: a record carries this cluster's marker but no claim exists.
	FindingOrphan FindingType = "Orphan"
	// FindingDuplicate: a record carries a bound claim's marker but not its IPAddress's address.
	FindingDuplicate FindingType = "Duplicate"
	// FindingRestored: a bound claim's record was gone; its address was reserved again.
	FindingRestored FindingType = "Restored"
	// FindingTaken: a bound claim's record was gone and another record holds its address.
	FindingTaken FindingType = "Taken"
	// FindingMoved: a bound claim's record was moved in the IPAM system to
	// another address or scope; it is reported, never deleted, and the
	// machine's address is held for the claim again.
	FindingMoved FindingType = "Moved"
	// FindingStray: a record carries this cluster's marker outside the
	// pool's sources (another VRF or network view, or another network) and
	// no claim of that name exists; it is reported, never deleted.
	FindingStray FindingType = "Stray"
	// FindingDeleted: a bound claim's record was deleted, or moved, in the
	// IPAM system, and the pool cannot hold its address or prefix again
	// (a carved child prefix: NetBox carves only the next free block
	// atomically); it is reported on the claim, nothing is carved.
	FindingDeleted FindingType = "Deleted"
)

// AuditFinding is one example of what an audit found.
type AuditFinding struct {
	// type of the finding.
	// +required
	Type FindingType `json:"type"`
	// address of the record.
	// +required
	// +kubebuilder:validation:MaxLength=43
	Address string `json:"address"`
	// marker of the record (for Taken: the claim's).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Marker string `json:"marker,omitempty"`
	// reference of the record in the IPAM system.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reference string `json:"reference,omitempty"`
	// released is true when the audit deleted the record.
	// +optional
	Released bool `json:"released,omitempty"`
}

// MaxAuditFindings bounds status.audit.findings.
const MaxAuditFindings = 10

// AuditStatus is what the pool's last audit found among the records of its
// sources that carry this management cluster's marker.
type AuditStatus struct {
	// lastRun is when the last audit finished.
	// +required
	LastRun metav1.Time `json:"lastRun"`
	// request is the value of the audit annotation the last audit answered.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Request string `json:"request,omitempty"`
	// observedGeneration is the pool's generation the last audit applied:
	// a changed spec (a new policy) is audited at once.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// records is the number of records listed, tombstones included.
	Records int32 `json:"records"`
	// orphans is the number of records whose claim is gone, released or not.
	Orphans int32 `json:"orphans"`
	// duplicates is the number of extra records of bound claims.
	Duplicates int32 `json:"duplicates"`
	// drifted is the number of bound claims whose record was gone: restored, or taken by another record.
	Drifted int32 `json:"drifted"`
	// strays is the number of records with this cluster's marker outside
	// the pool's sources whose claim is gone.
	// +optional
	Strays int32 `json:"strays,omitempty"`
	// tombstones is the number of released records kept for the grace period.
	Tombstones int32 `json:"tombstones"`
	// nextTombstoneExpiry is when the next tombstone's grace period ends.
	// +optional
	NextTombstoneExpiry *metav1.Time `json:"nextTombstoneExpiry,omitempty"`
	// findings are examples, at most 10.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Findings []AuditFinding `json:"findings,omitempty"`
}
