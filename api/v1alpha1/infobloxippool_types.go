package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys read from an Infoblox pool's credentials Secret. The names follow the
// kubernetes.io/basic-auth and kubernetes.io/tls Secret types, so either type
// can be used; CABundleKey ("ca.crt") optionally holds the grid's CA.
const (
	// InfobloxUsernameKey and InfobloxPasswordKey hold a WAPI user's credentials.
	InfobloxUsernameKey = "username"
	InfobloxPasswordKey = "password"
	// InfobloxClientCertKey and InfobloxClientKeyKey hold a PEM client
	// certificate and its key, for grids that authenticate by certificate.
	InfobloxClientCertKey = "tls.crt"
	InfobloxClientKeyKey  = "tls.key"
)

// InfobloxIPPoolSpec describes where an Infoblox pool takes addresses from
// and what it creates in the grid for each claim.
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || self.prefixLength <= 32 || self.sources.all(s, has(s.network) ? (isCIDR(s.network.cidr) && cidr(s.network.cidr).ip().family() == 6) : (isIP(s.range.start) && ip(s.range.start).family() == 6))",message="prefixLength must be at most 32 when a source is IPv4"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || self.preAllocations.all(k, !isIP(self.preAllocations[k]) || self.sources.exists(s, (has(s.network) && isCIDR(s.network.cidr) && cidr(s.network.cidr).containsIP(ip(self.preAllocations[k]))) || (has(s.range) && isIP(s.range.start) && ip(s.range.start).family() == ip(self.preAllocations[k]).family())))",message="every preAllocations address must lie in one of the sources: in a network's cidr, or of a range's family (a range's bounds are checked when a claim asks)"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || !has(self.gateway) || !has(self.gateway.address) || !isIP(self.gateway.address) || !self.preAllocations.exists(k, isIP(self.preAllocations[k]) && cidr(self.gateway.address + (ip(self.gateway.address).family() == 4 ? '/32' : '/128')).containsIP(self.preAllocations[k]))",message="a preAllocations address cannot be the gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.preAllocations) || self.preAllocations.all(k, !isIP(self.preAllocations[k]) || self.preAllocations.exists_one(j, isIP(self.preAllocations[j]) && cidr(self.preAllocations[k] + (ip(self.preAllocations[k]).family() == 4 ? '/32' : '/128')).containsIP(self.preAllocations[j])))",message="two preAllocations cannot request the same address"
// +kubebuilder:validation:XValidation:rule="has(self.childPrefixes) == has(oldSelf.childPrefixes) && (!has(self.childPrefixes) || self.childPrefixes.length == oldSelf.childPrefixes.length)",message="childPrefixes cannot be added, removed or changed: the pool's claims hold records of one kind and length; make another pool"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || self.sources.all(s, has(s.network))",message="childPrefixes are carved from network containers: every source must be a network"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || (!has(self.prefixLength) && !has(self.planned) && !has(self.preAllocations) && !(has(self.gateway) && has(self.gateway.address)))",message="a pool with childPrefixes hands out networks: it takes no prefixLength, gateway address, planned or preAllocations"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || !has(self.reservation) || ((!has(self.reservation.objectType) || self.reservation.objectType == 'FixedAddress') && !has(self.reservation.dns) && !has(self.reservation.namePattern) && (!has(self.reservation.macAddress) || self.reservation.macAddress == 'None'))",message="a pool with childPrefixes takes no reservation.objectType HostRecord, dns, namePattern or macAddress: they are fields of address objects"
// +kubebuilder:validation:XValidation:rule="!has(self.childPrefixes) || self.sources.all(s, !has(s.network) || !isCIDR(s.network.cidr) || (cidr(s.network.cidr).prefixLength() < self.childPrefixes.length && self.childPrefixes.length <= (cidr(s.network.cidr).ip().family() == 4 ? 32 : 128)))",message="childPrefixes.length must be longer than every source network and fit its family"
type InfobloxIPPoolSpec struct {
	// connection says how to reach the grid's WAPI.
	// +required
	Connection InfobloxConnection `json:"connection"`

	// networkView holds the sources and the objects the pool creates.
	// +optional
	// +kubebuilder:default=default
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	NetworkView string `json:"networkView,omitempty"`

	// sources are the networks and ranges to allocate from, tried in order:
	// the next source is used only when the previous ones are full.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Sources []InfobloxAddressSource `json:"sources"`

	// gateway of the IPAddresses. Without it the gateway is the first usable
	// address of the network holding the allocated address.
	// +optional
	Gateway Gateway `json:"gateway,omitempty,omitzero"`

	// prefixLength of the IPAddresses. Without it the length is that of the
	// network holding the allocated address.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	PrefixLength *int32 `json:"prefixLength,omitempty"`

	// reservation says what to create in the grid for each claim.
	// +optional
	Reservation InfobloxReservation `json:"reservation,omitempty,omitzero"`

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

	// planned makes claims adopt the objects the IPAM team planned for
	// them: a fixed address or host record (the pool's reservation
	// objectType) in one of the sources, without the provider's marker,
	// whose name is the one reservation.namePattern renders for the claim
	// (in dns.zone for host records with DNS), or whose extensible attribute
	// named here holds that name. The claim writes its marker on it and
	// changes nothing else; releasing the claim removes the marker and
	// keeps the object, as planned. See docs/planned-records.md.
	// +optional
	Planned *InfobloxPlanned `json:"planned,omitempty"`

	// childPrefixes makes the pool hand each claim a child network carved
	// from its sources, which are then network containers, instead of an
	// address: the claim's IPAddress holds the child's network address,
	// with the child's length as its prefix and no gateway. The grid carves
	// each child with func:nextavailablenetwork and it carries the claim's
	// marker attribute; releasing the claim deletes it. The pool's counts
	// are then in children. See docs/subnets.md.
	// +optional
	ChildPrefixes *ChildPrefixes `json:"childPrefixes,omitempty"`
}

// InfobloxPlanned says how the IPAM team names the objects it plans for
// claims.
type InfobloxPlanned struct {
	// extensibleAttribute names a string extensible attribute that holds
	// the name the pool renders for the claim. Without it, the object's own
	// name must be that name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self != 'CAPI-IPAM-Claim'",message="CAPI-IPAM-Claim holds the provider's claim marker"
	ExtensibleAttribute string `json:"extensibleAttribute,omitempty"`
}

// InfobloxConnection says how to reach the grid's WAPI.
type InfobloxConnection struct {
	// host is the grid master's (or a WAPI member's) DNS name or IP address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) || self.matches('^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$')",message="host must be a DNS name or an IP address, without scheme or port"
	Host string `json:"host"`

	// port of the WAPI, 443 unless the grid is set up otherwise.
	// +optional
	// +kubebuilder:default=443
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// wapiVersion is the WAPI version to speak, for example "2.12". The grid
	// must support it (NIOS 8.6 and later support 2.12).
	// +optional
	// +kubebuilder:default="2.12"
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+(\.[0-9]+)?$`
	WAPIVersion string `json:"wapiVersion,omitempty"`

	// credentialsSecretRef names the Secret holding either "username" and
	// "password", or a client certificate and key under "tls.crt" and
	// "tls.key"; and, optionally, the grid's CA under "ca.crt".
	// +required
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`

	// insecureSkipTLSVerify turns off verification of the grid's certificate.
	// Only for test installations.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// rateLimit bounds the requests to the grid, shared with every pool on the
	// same endpoint (the strictest limit wins). A 429, or a 503 with
	// Retry-After, holds every request to the endpoint back for as long as
	// it asks, whatever the limit.
	// +optional
	// +kubebuilder:default={}
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// InfobloxAddressSource is one network or DHCP range of the network view.
// +kubebuilder:validation:XValidation:rule="has(self.network) != has(self.range)",message="exactly one of network or range must be set"
type InfobloxAddressSource struct {
	// network selects an IPv4 or IPv6 network by its CIDR.
	// +optional
	Network *InfobloxNetworkSource `json:"network,omitempty"`

	// range selects an IPv4 or IPv6 range by its first and last address.
	// +optional
	Range *InfobloxRangeSource `json:"range,omitempty"`
}

// InfobloxNetworkSource selects a network.
type InfobloxNetworkSource struct {
	// cidr of the network, for example 10.0.0.0/24 or 2001:db8::/64.
	// +required
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="cidr must be a network address with its prefix length, for example 10.0.0.0/24"
	CIDR string `json:"cidr"`
}

// InfobloxRangeSource selects a range by its first and last address.
// +kubebuilder:validation:XValidation:rule="ip(self.start).family() == ip(self.end).family()",message="start and end must be of the same IP family"
type InfobloxRangeSource struct {
	// start is the range's first address.
	// +required
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="start must be an IP address without prefix length"
	Start string `json:"start"`

	// end is the range's last address.
	// +required
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="end must be an IP address without prefix length"
	End string `json:"end"`
}

// InfobloxObjectType is the kind of grid object that holds a reservation.
// +kubebuilder:validation:Enum=FixedAddress;HostRecord
type InfobloxObjectType string

const (
	// InfobloxFixedAddress reserves the address with a fixed address whose
	// match_client is RESERVED (IPv4), or an IPv6 fixed address with a DUID
	// derived from the claim.
	InfobloxFixedAddress InfobloxObjectType = "FixedAddress"
	// InfobloxHostRecord reserves the address with a host record.
	InfobloxHostRecord InfobloxObjectType = "HostRecord"
)

// InfobloxReservation says what the pool creates in the grid for each claim.
// Patterns are Go templates over .ClaimName, .Namespace, .ClusterName and
// .MachineName (see MachineNameAnnotation).
// +kubebuilder:validation:XValidation:rule="!has(self.dns) || self.objectType == 'HostRecord'",message="dns applies to host records only"
// +kubebuilder:validation:XValidation:rule="!has(self.macAddress) || self.macAddress == 'None' || self.objectType == 'FixedAddress'",message="macAddress Machine applies to fixed addresses only"
type InfobloxReservation struct {
	// objectType is FixedAddress (the default) or HostRecord.
	// +optional
	// +kubebuilder:default=FixedAddress
	ObjectType InfobloxObjectType `json:"objectType,omitempty"`

	// namePattern renders the object's name. For a host record with DNS it
	// is the host's label within dns.zone. The default is
	// "{{ .ClusterName }}-{{ .ClaimName }}".
	// +optional
	// +kubebuilder:validation:MaxLength=255
	NamePattern string `json:"namePattern,omitempty"`

	// commentPattern renders the object's comment. The default names the
	// cluster and the claim.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	CommentPattern string `json:"commentPattern,omitempty"`

	// dns turns on DNS for host records: each host record is created as
	// <name>.<zone> in the DNS view. Without it host records are created with
	// DNS off (configure_for_dns false).
	// +optional
	DNS *InfobloxDNS `json:"dns,omitempty"`

	// extensibleAttributes are values of existing string extensible
	// attributes to set on every object, besides the provider's claim marker.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	ExtensibleAttributes map[string]string `json:"extensibleAttributes,omitempty"`

	// macAddress says which MAC an IPv4 fixed address carries. None (the
	// default) reserves the address: match_client RESERVED, MAC
	// 00:00:00:00:00:00. Machine makes it a DHCP reservation for the
	// machine's interface: match_client MAC_ADDRESS and the MAC of the
	// interface the claim serves, read when the claim is first reserved.
	// Metal3: the BareMetalHost's bootMACAddress; the claim waits
	// (MACAddressUnknown) until the host has one. CAPV: the network
	// device's macAddr set in the VSphereMachine; without one the address
	// is reserved without a MAC (CAPV reports the MAC vSphere generates
	// only once the addresses are bound). A claim no machine owns is
	// reserved without a MAC unless it carries the annotation
	// ipam-bridge.github.io/mac-address.
	// IPv6 fixed addresses keep their DUID. Fixed addresses only.
	// +optional
	// +kubebuilder:default=None
	MACAddress InfobloxMACAddress `json:"macAddress,omitempty"`
}

// InfobloxMACAddress is where a fixed address's MAC comes from.
// +kubebuilder:validation:Enum=None;Machine
type InfobloxMACAddress string

const (
	// InfobloxMACNone reserves fixed addresses without a MAC.
	InfobloxMACNone InfobloxMACAddress = "None"
	// InfobloxMACMachine gives fixed addresses the MAC of the machine's
	// interface.
	InfobloxMACMachine InfobloxMACAddress = "Machine"
)

// InfobloxDNS says where host records live in DNS.
type InfobloxDNS struct {
	// zone is the authoritative zone that holds the host records, for
	// example "k8s.example.com".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9_]([-a-zA-Z0-9_]*[a-zA-Z0-9])?([.][a-zA-Z0-9_]([-a-zA-Z0-9_]*[a-zA-Z0-9])?)*$')",message="zone must be a DNS name without a trailing dot"
	Zone string `json:"zone"`

	// view is the DNS view of the zone.
	// +optional
	// +kubebuilder:default=default
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	View string `json:"view,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=infobloxippools,scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.addresses.total"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.addresses.used"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.addresses.free"
// +kubebuilder:printcolumn:name="Orphans",type="integer",JSONPath=".status.audit.orphans"
// +kubebuilder:printcolumn:name="Drifted",type="integer",JSONPath=".status.audit.drifted"
// +kubebuilder:printcolumn:name="Grid",type="string",JSONPath=".spec.connection.host",priority=1
// +kubebuilder:printcolumn:name="View",type="string",JSONPath=".spec.networkView",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// InfobloxIPPool hands out addresses from Infoblox networks and ranges to
// IPAddressClaims in its own namespace.
type InfobloxIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec InfobloxIPPoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status PoolStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// InfobloxIPPoolList is a list of InfobloxIPPools.
type InfobloxIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfobloxIPPool `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=globalinfobloxippools,scope=Cluster,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.addresses.total"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.addresses.used"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.addresses.free"
// +kubebuilder:printcolumn:name="Orphans",type="integer",JSONPath=".status.audit.orphans"
// +kubebuilder:printcolumn:name="Drifted",type="integer",JSONPath=".status.audit.drifted"
// +kubebuilder:printcolumn:name="Grid",type="string",JSONPath=".spec.connection.host",priority=1
// +kubebuilder:printcolumn:name="View",type="string",JSONPath=".spec.networkView",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// GlobalInfobloxIPPool is a cluster-scoped InfobloxIPPool: claims in any
// namespace may use it, and it reads its Secret from the manager's namespace.
type GlobalInfobloxIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec InfobloxIPPoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status PoolStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// GlobalInfobloxIPPoolList is a list of GlobalInfobloxIPPools.
type GlobalInfobloxIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalInfobloxIPPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfobloxIPPool{}, &InfobloxIPPoolList{}, &GlobalInfobloxIPPool{}, &GlobalInfobloxIPPoolList{})
}
