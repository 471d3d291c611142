package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys read from a NetBox pool's credentials Secret.
const (
	// NetboxTokenKey holds the API token: a v1 token (sent as "Token …") or
	// a v2 token ("nbt_<key>.<secret>", NetBox 4.5+, sent as "Bearer …").
	NetboxTokenKey = "token"
	// CABundleKey optionally holds PEM certificates that verify the server.
	CABundleKey = "ca.crt"
)

// NetboxIPPoolSpec describes where a NetBox pool takes addresses from and what
// it records on each reservation. A source named by id is checked when the
// pool is validated instead.
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || self.prefixLength <= 32 || self.sources.all(s, !(has(s.prefix) && has(s.prefix.cidr) && isCIDR(s.prefix.cidr) && cidr(s.prefix.cidr).ip().family() == 4) && !(has(s.ipRange) && has(s.ipRange.start) && isIP(s.ipRange.start) && ip(s.ipRange.start).family() == 4))",message="prefixLength must be at most 32 when a source is IPv4"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || self.preAllocations.all(k, !isIP(self.preAllocations[k]) || self.sources.exists(s, (has(s.prefix) && (!has(s.prefix.cidr) || (isCIDR(s.prefix.cidr) && cidr(s.prefix.cidr).containsIP(ip(self.preAllocations[k]))))) || (has(s.ipRange) && (!has(s.ipRange.start) || (isIP(s.ipRange.start) && ip(s.ipRange.start).family() == ip(self.preAllocations[k]).family())))))",message="every preAllocations address must lie in one of the sources: in a prefix's cidr, or of an IP range's family (a source given by id, and a range's bounds, are checked when a claim asks)"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || !has(self.gateway) || !has(self.gateway.address) || !isIP(self.gateway.address) || !self.preAllocations.exists(k, isIP(self.preAllocations[k]) && cidr(self.gateway.address + (ip(self.gateway.address).family() == 4 ? '/32' : '/128')).containsIP(self.preAllocations[k]))",message="a preAllocations address cannot be the gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || self.preAllocations.all(k, !isIP(self.preAllocations[k]) || self.preAllocations.exists_one(j, isIP(self.preAllocations[j]) && cidr(self.preAllocations[k] + (ip(self.preAllocations[k]).family() == 4 ? '/32' : '/128')).containsIP(self.preAllocations[j])))",message="two preAllocations cannot request the same address"
// +kubebuilder:validation:XValidation:rule="!has(self.planned) || (has(self.reservation) && has(self.reservation.dnsNamePattern) && size(self.reservation.dnsNamePattern) > 0)",message="planned IP addresses are found by the DNS name reservation.dnsNamePattern renders for a claim: set it"
// +kubebuilder:validation:XValidation:rule="has(self.childPrefixes) == has(oldSelf.childPrefixes) && (!has(self.childPrefixes) || self.childPrefixes.length == oldSelf.childPrefixes.length)",message="childPrefixes cannot be added, removed or changed: the pool's claims hold records of one kind and length; make another pool"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || self.sources.all(s, has(s.prefix))",message="childPrefixes are carved from prefixes: every source must be a prefix"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || (!has(self.prefixLength) && !has(self.planned) && !has(self.preAllocations) && !(has(self.gateway) && has(self.gateway.address)))",message="a pool with childPrefixes hands out networks: it takes no prefixLength, gateway address, planned or preAllocations"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || !has(self.reservation) || (!has(self.reservation.role) && !has(self.reservation.dnsNamePattern))",message="a pool with childPrefixes takes no reservation.role or reservation.dnsNamePattern: they are fields of IP addresses"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || self.sources.all(s, !has(s.prefix) || !has(s.prefix.cidr) || !isCIDR(s.prefix.cidr) || (cidr(s.prefix.cidr).prefixLength() < self.childPrefixes.length && self.childPrefixes.length <= (cidr(s.prefix.cidr).ip().family() == 4 ? 32 : 128)))",message="childPrefixes.length must be longer than every source prefix and fit its family"
type NetboxIPPoolSpec struct {
	// connection says how to reach NetBox.
	// +required
	Connection NetboxConnection `json:"connection"`

	// sources are the NetBox prefixes and IP ranges to allocate from, tried in
	// order: the next source is used only when the previous ones are full.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Sources []NetboxAddressSource `json:"sources"`

	// gateway of the IPAddresses. Without it the gateway is the first usable
	// address of the allocated address's prefix.
	// +optional
	Gateway Gateway `json:"gateway,omitempty,omitzero"`

	// prefixLength of the IPAddresses. Without it the length is the one NetBox
	// records on the allocated address, which is its prefix's (or, for an IP
	// range, the range's).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	PrefixLength *int32 `json:"prefixLength,omitempty"`

	// reservation says what to record on each IP address created in NetBox,
	// besides the provider's tag and claim marker.
	// +optional
	Reservation NetboxReservation `json:"reservation,omitempty,omitzero"`

	// orphans says what the pool's audit does with records that carry this
	// management cluster's marker but whose claim is gone.
	// +optional
	Orphans Orphans `json:"orphans,omitempty,omitzero"`

	// release says how a claim's address is released.
	// +optional
	Release ReleaseSettings `json:"release,omitempty,omitzero"`

	// preAllocations request addresses for claims by name, as Metal3's
	// IPPools do: a claim named by a key ("<name>", or "<namespace>/<name>",
	// which wins) requests that address and gets it or none, as with the
	// claim annotation ipam-bridge.github.io/requested-address (which must
	// agree). Each address must lie in one of the sources and not be the
	// gateway.
	// +optional
	PreAllocations PreAllocations `json:"preAllocations,omitempty"`

	// childPrefixes makes the pool hand each claim a child prefix carved
	// from its prefix sources instead of an address: the claim's IPAddress
	// holds the child's network address, with the child's length as its
	// prefix and no gateway, as the in-cluster provider's prefix pools do.
	// NetBox carves each child with its available-prefixes request and it
	// carries the claim's marker; releasing the claim deletes it. The
	// pool's counts are then in children. See docs/subnets.md.
	// +optional
	ChildPrefixes *NetboxChildPrefixes `json:"childPrefixes,omitempty"`

	// planned makes claims adopt the IP addresses the IPAM team planned for
	// them: an IP address in one of the sources, without the provider's
	// marker, whose DNS name is the one reservation.dnsNamePattern renders
	// for the claim, and that carries the tag or has the status given here.
	// The claim writes its marker on it (not the provider's tag) and changes
	// nothing else; releasing the claim removes the marker and keeps the IP
	// address, as planned. See docs/planned-records.md.
	// +optional
	Planned *NetboxPlanned `json:"planned,omitempty"`
}

// NetboxChildPrefixes says how a NetBox pool carves a child prefix for each
// claim, and the prefix fields each child gets besides the reservation's
// status, tenant, tags, custom fields and description.
type NetboxChildPrefixes struct {
	ChildPrefixes `json:",inline"`

	// role is the slug of the prefix role (IPAM > Prefix & VLAN Roles) each
	// child gets, for example kubernetes-nodes. It must exist in NetBox.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Role string `json:"role,omitempty"`

	// scope is where the children are used, as NetBox 4.2 and later record
	// it on a prefix (its scope_type and scope_id): a site, location, region
	// or site group, by slug. It must exist in NetBox.
	// +optional
	Scope *NetboxPrefixScope `json:"scope,omitempty"`
}

// NetboxPrefixScope names the object a prefix is scoped to.
type NetboxPrefixScope struct {
	// kind of the object.
	// +required
	// +kubebuilder:validation:Enum=Site;Location;Region;SiteGroup
	Kind string `json:"kind"`

	// slug of the object. A location's slug is unique within its site
	// only: one that two sites share is refused as ambiguous.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Slug string `json:"slug"`
}

// NetboxPlanned says how the IPAM team marks the IP addresses it plans for
// claims; an IP address must match every field set.
// +kubebuilder:validation:XValidation:rule="has(self.tag) || has(self.status)",message="planned needs a tag or a status that marks planned IP addresses"
type NetboxPlanned struct {
	// tag is the slug of an existing NetBox tag on planned IP addresses.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Tag string `json:"tag,omitempty"`

	// status of planned IP addresses, for example reserved.
	// +optional
	// +kubebuilder:validation:Enum=active;reserved;deprecated;dhcp;slaac
	Status string `json:"status,omitempty"`
}

// NetboxConnection says how to reach NetBox.
type NetboxConnection struct {
	// url of NetBox, without the /api suffix, for example https://netbox.example.com.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL"
	URL string `json:"url"`

	// credentialsSecretRef names the Secret holding the API token under the key
	// "token" and, optionally, a CA bundle under "ca.crt".
	// +required
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`

	// insecureSkipTLSVerify turns off verification of NetBox's certificate.
	// Only for test installations.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// rateLimit bounds the requests to NetBox, shared with every pool on the
	// same endpoint (the strictest limit wins). A 429, or a 503 with
	// Retry-After, holds every request to the endpoint back for as long as
	// it asks, whatever the limit.
	// +optional
	// +kubebuilder:default={}
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// NetboxAddressSource is one NetBox prefix or IP range.
// +kubebuilder:validation:XValidation:rule="has(self.prefix) != has(self.ipRange)",message="exactly one of prefix or ipRange must be set"
type NetboxAddressSource struct {
	// prefix selects a NetBox prefix.
	// +optional
	Prefix *NetboxPrefixSource `json:"prefix,omitempty"`

	// ipRange selects a NetBox IP range.
	// +optional
	IPRange *NetboxIPRangeSource `json:"ipRange,omitempty"`
}

// NetboxPrefixSource selects a NetBox prefix by ID, or by CIDR within a VRF.
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.cidr)",message="exactly one of id or cidr must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.vrf) || has(self.cidr)",message="vrf selects a prefix by cidr and cannot be used with id"
type NetboxPrefixSource struct {
	// id of the prefix in NetBox.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ID *int32 `json:"id,omitempty"`

	// cidr of the prefix, for example 10.0.0.0/24 or 2001:db8::/64.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="cidr must be a network address with its prefix length, for example 10.0.0.0/24"
	CIDR string `json:"cidr,omitempty"`

	// vrf is the name of the VRF holding the prefix. Without it the prefix is
	// looked up in the global table.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	VRF string `json:"vrf,omitempty"`
}

// NetboxIPRangeSource selects a NetBox IP range by ID, or by its first and
// last address within a VRF.
// +kubebuilder:validation:XValidation:rule="has(self.id) != (has(self.start) || has(self.end))",message="exactly one of id or start and end must be set"
// +kubebuilder:validation:XValidation:rule="has(self.start) == has(self.end)",message="start and end go together"
// +kubebuilder:validation:XValidation:rule="!has(self.start) || ip(self.start).family() == ip(self.end).family()",message="start and end must be of the same IP family"
// +kubebuilder:validation:XValidation:rule="!has(self.vrf) || has(self.start)",message="vrf selects a range by start and end and cannot be used with id"
type NetboxIPRangeSource struct {
	// id of the IP range in NetBox.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ID *int32 `json:"id,omitempty"`

	// start is the range's first address, without prefix length.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="start must be an IP address without prefix length"
	Start string `json:"start,omitempty"`

	// end is the range's last address, without prefix length.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="end must be an IP address without prefix length"
	End string `json:"end,omitempty"`

	// vrf is the name of the VRF holding the range. Without it the range is
	// looked up in the global table.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	VRF string `json:"vrf,omitempty"`
}

// NetboxReservation says what to record on each IP address the pool creates.
// Patterns are Go templates over .ClaimName, .Namespace, .ClusterName and
// .MachineName (see MachineNameAnnotation).
type NetboxReservation struct {
	// status of the IP address in NetBox.
	// +optional
	// +kubebuilder:default=active
	// +kubebuilder:validation:Enum=active;reserved;deprecated;dhcp;slaac
	Status string `json:"status,omitempty"`

	// role of the IP address in NetBox.
	// +optional
	// +kubebuilder:validation:Enum=loopback;secondary;anycast;vip;vrrp;hsrp;glbp;carp
	Role string `json:"role,omitempty"`

	// tenant is the slug of the NetBox tenant to assign.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Tenant string `json:"tenant,omitempty"`

	// dnsNamePattern renders the IP address's DNS name, for example
	// "{{ .MachineName }}.{{ .ClusterName }}.example.com".
	// +optional
	// +kubebuilder:validation:MaxLength=255
	DNSNamePattern string `json:"dnsNamePattern,omitempty"`

	// descriptionPattern renders the IP address's description. The default
	// names the cluster and the claim.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	DescriptionPattern string `json:"descriptionPattern,omitempty"`

	// tags are slugs of existing NetBox tags to add besides the provider's own.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=100
	Tags []string `json:"tags,omitempty"`

	// customFields are values of existing NetBox text custom fields to set.
	// They cannot set capi_ipam_claim, the provider's claim marker.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="!('capi_ipam_claim' in self)",message="customFields cannot set capi_ipam_claim: it holds the provider's claim marker"
	CustomFields map[string]string `json:"customFields,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=netboxippools,scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.addresses.total"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.addresses.used"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.addresses.free"
// +kubebuilder:printcolumn:name="Orphans",type="integer",JSONPath=".status.audit.orphans"
// +kubebuilder:printcolumn:name="Drifted",type="integer",JSONPath=".status.audit.drifted"
// +kubebuilder:printcolumn:name="NetBox",type="string",JSONPath=".spec.connection.url",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// NetboxIPPool hands out addresses from NetBox prefixes and IP ranges to
// IPAddressClaims in its own namespace.
type NetboxIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec NetboxIPPoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status PoolStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// NetboxIPPoolList is a list of NetboxIPPools.
type NetboxIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetboxIPPool `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=globalnetboxippools,scope=Cluster,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.addresses.total"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.addresses.used"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.addresses.free"
// +kubebuilder:printcolumn:name="Orphans",type="integer",JSONPath=".status.audit.orphans"
// +kubebuilder:printcolumn:name="Drifted",type="integer",JSONPath=".status.audit.drifted"
// +kubebuilder:printcolumn:name="NetBox",type="string",JSONPath=".spec.connection.url",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// GlobalNetboxIPPool is a cluster-scoped NetboxIPPool: claims in any namespace
// may use it, and it reads its Secret from the manager's namespace.
type GlobalNetboxIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec NetboxIPPoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status PoolStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// GlobalNetboxIPPoolList is a list of GlobalNetboxIPPools.
type GlobalNetboxIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalNetboxIPPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NetboxIPPool{}, &NetboxIPPoolList{}, &GlobalNetboxIPPool{}, &GlobalNetboxIPPoolList{})
}
