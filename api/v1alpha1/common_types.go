package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons set on pools. Claims use CAPI's own reasons
// (AllocationFailed, PoolNotReady, PoolExhausted) from api/ipam/v1beta2.
const (
	// ReadyCondition is True when the pool's backend answered with the given
	// credentials and every address source was found.
	ReadyCondition = "Ready"

	// ReadyReason: the pool was validated against its backend.
	ReadyReason = "Ready"
	// CredentialsSecretNotFoundReason: the Secret named in the pool does not exist where the pool may read it.
	CredentialsSecretNotFoundReason = "CredentialsSecretNotFound"
	// CredentialsNotAllowedReason: the Secret does not carry the
	// CredentialsLabel, so its owner has not allowed pools to use it.
	CredentialsNotAllowedReason = "CredentialsNotAllowed"
	// EndpointNotAllowedReason: the pool is namespaced and its IPAM
	// endpoint is not one that the manager's --allowed-endpoints lists; no
	// connection was made.
	EndpointNotAllowedReason = "EndpointNotAllowed"
	// InvalidCredentialsSecretReason: the Secret lacks a key or holds an unusable value.
	InvalidCredentialsSecretReason = "InvalidCredentialsSecret"
	// AuthenticationFailedReason: the backend refused the credentials.
	AuthenticationFailedReason = "AuthenticationFailed"
	// PermissionDeniedReason: the credentials work but lack a permission the provider needs.
	PermissionDeniedReason = "PermissionDenied"
	// SourceNotFoundReason: an address source does not exist in the backend.
	SourceNotFoundReason = "SourceNotFound"
	// InvalidConfigurationReason: the spec is inconsistent with what the backend holds (for example a gateway outside a prefix).
	InvalidConfigurationReason = "InvalidConfiguration"
	// BackendUnavailableReason: the backend could not be reached or answered with a server error.
	BackendUnavailableReason = "BackendUnavailable"
	// BackendThrottledReason: the backend refused requests as too many (HTTP 429) after every retry, or asked
	// (429, or 503 with Retry-After) for a pause longer than a request may wait.
	BackendThrottledReason = "BackendThrottled"
	// SetupRequiredReason: the backend lacks an object the provider needs (a tag, custom field or extensible attribute) and the credentials may not create it.
	SetupRequiredReason = "SetupRequired"
	// DeletingReason: the pool is being deleted and waits for the allocations under way, the IPAddresses allocated from it and the claims of it that may hold a reservation to be released.
	DeletingReason = "Deleting"
	// PausedReason: the pool carries the cluster.x-k8s.io/paused annotation.
	PausedReason = "Paused"

	// ConnectionSecureCondition is False when the pool reaches its IPAM
	// system over plain http or without verifying its certificate: its
	// credentials can then be read or its answers forged on the way.
	ConnectionSecureCondition = "ConnectionSecure"
	// SecureReason: https with certificate verification.
	SecureReason = "Secure"
	// InsecureConnectionReason: plain http, or insecureSkipTLSVerify.
	InsecureConnectionReason = "InsecureConnection"

	// AddressesCountedCondition is True when status.addresses holds the
	// counts of the last refresh, and False while refreshing them fails; the
	// pool stays ready and keeps allocating meanwhile.
	AddressesCountedCondition = "AddressesCounted"
	// CountedReason: the counts were refreshed.
	CountedReason = "Counted"
	// CountFailedReason: refreshing the counts failed; status.addresses holds the last ones.
	CountFailedReason = "CountFailed"
)

// CredentialsLabel must be set to "true" on a Secret before a pool may use
// it: whoever may create a pool in a namespace may otherwise point it at a
// server of their own with any Secret there that has the right keys, and
// receive the credentials.
const CredentialsLabel = "ipam-bridge.github.io/credentials"

// Annotations on IPAddresses that record where a reservation lives, so that
// its release finds it whatever becomes of the pool's spec. A claim whose
// IPAddress is deleted before it takes them over.
const (
	// ReservationEndpointAnnotation names the IPAM system (NetBox's URL, the
	// grid's WAPI URL).
	ReservationEndpointAnnotation = "ipam-bridge.github.io/endpoint"
	// ReservationRecordAnnotation is the record's reference there
	// (ipam/ip-addresses/<id>, or the WAPI _ref naming object type and view).
	ReservationRecordAnnotation = "ipam-bridge.github.io/record"
	// ReservationScopeAnnotation is the address space of the record in its
	// system (vrf/<id> or vrf/global in NetBox, view/<network view> in
	// Infoblox): the provider never binds an address that another live
	// IPAddress holds in the same system and scope.
	ReservationScopeAnnotation = "ipam-bridge.github.io/scope"
	// ReservationPlannedAnnotation, "true", says that the record is a plan
	// the claim adopted: a release that finds it at its reference without
	// a marker knows it was already returned to the IPAM team.
	ReservationPlannedAnnotation = "ipam-bridge.github.io/planned"
	// ReservationMarkerAnnotation is the marker the record was made or
	// last marked with. clusterctl move carries it to the target, whose
	// identity differs: there it names exactly the record the claim may
	// take as its own, and no other cluster's record of a claim of the
	// same namespace and name.
	ReservationMarkerAnnotation = "ipam-bridge.github.io/marker"
	// RecordMovedAnnotation on an IPAddress says that the IPAM team moved
	// its claim's record elsewhere (what it says is where): the audit
	// reports such records and never deletes them as duplicates.
	RecordMovedAnnotation = "ipam-bridge.github.io/record-moved"
)

// MachineNameAnnotation on an IPAddressClaim holds the name of the Machine
// the claim's address is for (.MachineName in the pools' patterns). The
// provider writes it once, from the claim's owner chain, before it first
// reserves; a value set beforehand is kept, so it also names a Machine for
// claims that no Machine owns.
const MachineNameAnnotation = "ipam-bridge.github.io/machine-name"

// MACAddressAnnotation on an IPAddressClaim of a pool whose fixed addresses
// carry the machine's MAC (spec.reservation.macAddress Machine) holds the
// MAC its record carries, lower case with colons. The provider writes the
// machine's MAC before it first reserves, and, once bound, the MAC the
// record carries (a plan the claim adopted carries the one the IPAM team
// set; without one, such as an IPv6 fixed address, the annotation goes);
// it then compares it with the machine's MAC (a difference is reported,
// never written to the grid). A value set beforehand is what the new
// record gets, so it also gives a MAC to claims that no machine owns.
const MACAddressAnnotation = "ipam-bridge.github.io/mac-address"

// MACAddressSourceAnnotation on such a claim names the object its MAC was
// read from, "<Kind>.<group>/<namespace>/<name>" (for example
// "BareMetalHost.metal3.io/hosts/host-0"), so that a restarted manager
// knows which object's changes to compare the MAC against without reading
// the owner chain of every bound claim. The provider writes it with
// MACAddressAnnotation.
const MACAddressSourceAnnotation = "ipam-bridge.github.io/mac-address-source"

// The condition a bound claim of a pool whose fixed addresses carry the
// machine's MAC has: does its record's MAC (MACAddressAnnotation) still
// match the machine's?
const (
	// MACAddressCurrentCondition is True while the machine's MAC is the one
	// the claim's record carries, False once they differ.
	MACAddressCurrentCondition = "MACAddressCurrent"
	// MACAddressMatchesReason: the machine's MAC is the record's.
	MACAddressMatchesReason = "MACAddressMatches"
	// MACAddressChangedReason: the machine's MAC is not the record's: it
	// changed after the record was made, or the plan the claim adopted
	// carries another; the record keeps its MAC until the IPAM team
	// changes it.
	MACAddressChangedReason = "MACAddressChanged"
)

// RequestedAddressAnnotation on an IPAddressClaim asks for one address, for
// example "10.120.0.10" or "2001:db8::10" (no prefix length): the claim gets
// exactly that address, or none and says why (RequestedAddressUnavailable),
// never another. The address must lie in one of the pool's sources, not be
// its gateway, and be free in the IPAM system or already reserved with the
// claim's marker. A pool's spec.preAllocations may request an address for a
// claim by its name instead; when both do, they must agree. The request is
// read when the claim is first bound: a bound claim keeps its address.
const RequestedAddressAnnotation = "ipam-bridge.github.io/requested-address"

// ReclaimPolicyAnnotation on an IPAddressClaim says what becomes of its
// record in the IPAM system when the claim is deleted: Delete (as with no
// annotation) releases it as the pool says; Retain keeps it there for the
// IPAM team, without the claim's marker, so that the provider holds it no
// more and never hands its address or block to a claim again. A
// ClusterSubnet's spec.reclaimPolicy sets it on the subnet's claims. Any
// other value stops the release and says so (ReclaimPolicyUnknown). It is
// read when the release begins.
const ReclaimPolicyAnnotation = "ipam-bridge.github.io/reclaim-policy"

// ReclaimPolicy says what becomes of a record when its claim goes.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

const (
	// ReclaimDelete releases the record: deleted, or kept as a tombstone
	// for the pool's grace period.
	ReclaimDelete ReclaimPolicy = "Delete"
	// ReclaimRetain keeps the record for the IPAM team, without a marker.
	ReclaimRetain ReclaimPolicy = "Retain"
)

// PreAllocations request addresses for claims by name, as Metal3's IPPools
// do: a claim whose name is a key requests the address it maps to. A key
// "<namespace>/<name>" names a claim of one namespace and wins over the name
// alone, which a Global pool's claims in every namespace share.
// +kubebuilder:validation:MaxProperties=256
type PreAllocations map[string]IPAddressString

// IPAddressString is an IPv4 or IPv6 address without prefix length.
// +kubebuilder:validation:MaxLength=39
// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address without prefix length"
type IPAddressString string

// Finalizers.
const (
	// PoolFinalizer keeps a pool while IPAddresses allocated from it exist.
	PoolFinalizer = "ipam-bridge.github.io/protect-pool"
	// CredentialsInUseFinalizer keeps a credentials Secret while a pool
	// names it, so that claims can still be released when the Secret's
	// namespace is deleted.
	CredentialsInUseFinalizer = "ipam-bridge.github.io/credentials-in-use"
)

// SecretReference names a Secret. A namespaced pool reads it from its own
// namespace; a cluster-scoped pool reads it from the manager's namespace.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RateLimit bounds the requests the manager sends to one IPAM endpoint
// (scheme, host and port). Every pool on the endpoint shares the limit;
// when their pools set different limits, the strictest value of each field
// applies to all of them.
type RateLimit struct {
	// requestsPerSecond is the sustained rate of requests. A new claim costs
	// two requests, a release two.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	RequestsPerSecond int32 `json:"requestsPerSecond,omitempty"`

	// burst is how many requests may be sent at once after a quiet spell.
	// +optional
	// +kubebuilder:default=40
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Burst int32 `json:"burst,omitempty"`

	// maxConcurrentRequests is how many requests may await their answer at
	// once.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxConcurrentRequests int32 `json:"maxConcurrentRequests,omitempty"`
}

// GatewayPolicy says how a pool derives the gateway when none is given.
// +kubebuilder:validation:Enum=FirstUsable;None
type GatewayPolicy string

const (
	// GatewayFirstUsable takes the first address after the network address of
	// the allocated address's prefix (10.0.0.1 for 10.0.0.0/24, 2001:db8::1 for 2001:db8::/64).
	GatewayFirstUsable GatewayPolicy = "FirstUsable"
	// GatewayNone leaves the IPAddress without a gateway.
	GatewayNone GatewayPolicy = "None"
)

// Gateway says which gateway an IPAddress carries.
// +kubebuilder:validation:XValidation:rule="!(has(self.address) && has(self.policy) && self.policy == 'None')",message="address and policy None exclude each other"
type Gateway struct {
	// address is an explicit gateway. It must lie inside every address source.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IPv4 or IPv6 address"
	Address string `json:"address,omitempty"`

	// policy derives the gateway when address is empty. FirstUsable (the
	// default) takes the first address after the network address of the
	// allocated address's prefix; None sets no gateway.
	// +optional
	// +kubebuilder:default=FirstUsable
	Policy GatewayPolicy `json:"policy,omitempty"`
}

// ChildPrefixes says how a pool carves a child prefix for each claim.
type ChildPrefixes struct {
	// length of each child prefix: longer than every source prefix, for
	// example 64 for an IPv6 prefix per node, or 28 for an IPv4 one.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	Length int32 `json:"length"`
}

// AddressCounts are the pool's address counts as the backend reports them,
// summed over all address sources.
type AddressCounts struct {
	// total is the number of addresses the sources can hand out.
	Total int64 `json:"total"`
	// used is the number of those addresses that hold a record in the backend,
	// whoever made it.
	Used int64 `json:"used"`
	// free is total minus used.
	Free int64 `json:"free"`
}

// PoolStatus is the observed state shared by all pool kinds.
// +kubebuilder:validation:MinProperties=1
type PoolStatus struct {
	// conditions of the pool. Known condition types are Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// addresses counts the addresses in the pool's sources.
	// +optional
	Addresses *AddressCounts `json:"addresses,omitempty"`

	// audit is what the last audit found (see docs/audit.md).
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`
}
