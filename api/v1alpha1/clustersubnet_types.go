package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons of a ClusterSubnet's Ready condition (besides the
// claim's and the pools' own reasons, which it copies while it waits on
// them: PoolExhausted names the parent).
const (
	// SubnetReadyReason: the child is carved, its gateway held, and its
	// nodes pool validated.
	SubnetReadyReason = "SubnetReady"
	// SubnetClusterNotFoundReason: the subnet's Cluster does not exist, or
	// is being deleted: nothing is made for it.
	SubnetClusterNotFoundReason = "ClusterNotFound"
	// ParentPoolNotFoundReason: the parent pool does not exist.
	ParentPoolNotFoundReason = "ParentPoolNotFound"
	// ParentPoolUnsupportedReason: the parent pool cannot carve subnets for
	// clusters (it has no childPrefixes, or names its prefixes in a way the
	// nodes pool cannot name the child); nothing is claimed.
	ParentPoolUnsupportedReason = "ParentPoolUnsupported"
	// CarvingReason: the subnet's claim waits for its child prefix.
	CarvingReason = "Carving"
	// HoldingGatewayReason: the child is carved; its gateway is being
	// reserved in the IPAM system before the nodes pool is made.
	HoldingGatewayReason = "HoldingGateway"
	// NameTakenReason: an object the subnet would make (its claims or
	// pools) exists already and is not the subnet's.
	NameTakenReason = "NameTaken"
	// PoolNotReadyReason: the nodes pool does not validate yet; its own
	// condition says why.
	PoolNotReadyReason = "PoolNotReady"
	// SubnetCarvedReason (Normal event): the child was carved for the
	// Cluster.
	SubnetCarvedReason = "SubnetCarved"
	// SubnetDeletingReason: the subnet is being deleted and waits for the
	// nodes pool, whose machines' addresses are released first, then for
	// its gateway and its child to be released.
	SubnetDeletingReason = "SubnetDeleting"
)

// ClusterSubnetFinalizer keeps a ClusterSubnet until its nodes pool, its
// gateway and its child prefix are released, in that order.
const ClusterSubnetFinalizer = "ipam-bridge.github.io/cluster-subnet"

// SubnetParentReference names the pool a subnet is carved from: a pool of
// this provider, in the ClusterSubnet's namespace, with childPrefixes.
type SubnetParentReference struct {
	// kind of the parent pool. Namespaced kinds only: the nodes pool is made
	// beside the ClusterSubnet with the parent's credentials Secret, which a
	// cluster-scoped pool keeps in the manager's namespace.
	// +required
	// +kubebuilder:validation:Enum=NetboxIPPool;InfobloxIPPool
	Kind string `json:"kind"`

	// name of the parent pool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SubnetPoolSpec says how the subnet's nodes pool is made.
type SubnetPoolSpec struct {
	// name of the nodes pool, of the parent's kind; "<clusterName>-nodes"
	// unless given, the name a ClusterClass's machine templates can name
	// as "{{ .builtin.cluster.name }}-nodes".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// gatewayPolicy: FirstUsable (the default) reserves the child's first
	// usable address for the router in the IPAM system and makes it the
	// machines' gateway; None gives the machines no gateway and reserves
	// nothing. An explicit address cannot be given: the child is not known
	// until it is carved.
	// +optional
	// +kubebuilder:default=FirstUsable
	GatewayPolicy GatewayPolicy `json:"gatewayPolicy,omitempty"`
}

// ClusterSubnetSpec asks for a subnet for one Cluster.
// +kubebuilder:validation:XValidation:rule="has(self.pool) == has(oldSelf.pool) && (!has(self.pool) || self.pool == oldSelf.pool)",message="pool cannot be added, removed or changed: machines hold addresses from it"
type ClusterSubnetSpec struct {
	// clusterName is the Cluster, in this namespace, the subnet is for. The
	// subnet is carved once the Cluster exists, and the Cluster then owns
	// the ClusterSubnet, so that deleting the Cluster releases the subnet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName cannot change"
	ClusterName string `json:"clusterName"`

	// parentPoolRef names the pool whose childPrefixes.length sets the
	// subnet's length and whose sources it is carved from.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parentPoolRef cannot change: the child is carved from it"
	ParentPoolRef SubnetParentReference `json:"parentPoolRef"`

	// pool says how the nodes pool, whose only source is the child, is made.
	// +optional
	Pool SubnetPoolSpec `json:"pool,omitempty,omitzero"`

	// reclaimPolicy says what becomes of the child and its gateway's record
	// in the IPAM system once the subnet is deleted, after every machine's
	// address in it is released: Delete (the default) deletes them and the
	// parent is whole again; Retain keeps them there for the IPAM team,
	// without the provider's markers, so that no cluster is given that block
	// again until the IPAM team deletes it. It may change until the deletion
	// reaches the child.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// SubnetPoolReference names the nodes pool.
type SubnetPoolReference struct {
	// apiGroup of the pool, ipam-bridge.github.io.
	APIGroup string `json:"apiGroup"`
	// kind of the pool.
	Kind string `json:"kind"`
	// name of the pool.
	Name string `json:"name"`
}

// ClusterSubnetStatus is what the subnet holds and why it waits.
type ClusterSubnetStatus struct {
	// conditions of the subnet: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// prefix is the child carved for the cluster, for example 10.20.3.0/24.
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// gateway is the child's gateway, held in the IPAM system; empty with
	// gatewayPolicy None.
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// poolRef names the nodes pool once it exists.
	// +optional
	PoolRef *SubnetPoolReference `json:"poolRef,omitempty"`
}

// ClusterSubnet is a subnet carved for a Cluster from a parent pool, and a
// pool of the parent's kind whose only source is that subnet. It is released
// when it is deleted (its Cluster's deletion deletes it), after every address
// of its pool. See docs/subnets.md.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clustersubnets,scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="Prefix",type="string",JSONPath=".status.prefix"
// +kubebuilder:printcolumn:name="Gateway",type="string",JSONPath=".status.gateway"
// +kubebuilder:printcolumn:name="Pool",type="string",JSONPath=".status.poolRef.name"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterSubnet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterSubnetSpec `json:"spec"`

	// +optional
	Status ClusterSubnetStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// ClusterSubnetList is a list of ClusterSubnets.
type ClusterSubnetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSubnet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterSubnet{}, &ClusterSubnetList{})
}

// GetConditions returns the subnet's conditions.
func (s *ClusterSubnet) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions sets the subnet's conditions.
func (s *ClusterSubnet) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }
