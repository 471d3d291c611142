package v1alpha1

// Annotations on a Cluster that ask the provider for its control-plane
// endpoint: an address claimed from a pool through an ordinary
// IPAddressClaim the Cluster owns, written where the Cluster says, only
// where nothing is written yet (see docs/control-plane-endpoint.md).
// Annotations rather than a resource of ours: nothing more to install, and
// clusterctl move carries them with the Cluster.
const (
	// ControlPlaneEndpointPoolAnnotation, "<Kind>/<name>", names the pool
	// the endpoint's address is claimed from, for example
	// "NetboxIPPool/prod-vlan-120"; it is the opt-in. A namespaced pool
	// lives in the Cluster's namespace.
	ControlPlaneEndpointPoolAnnotation = "ipam-bridge.github.io/control-plane-endpoint-pool"
	// ControlPlaneEndpointPoolGroupAnnotation is the pool kind's API group,
	// ipam-bridge.github.io unless given: any provider's pool may serve.
	ControlPlaneEndpointPoolGroupAnnotation = "ipam-bridge.github.io/control-plane-endpoint-pool-group"
	// ControlPlaneEndpointPortAnnotation is spec.controlPlaneEndpoint.port,
	// 1 to 65535, DefaultControlPlaneEndpointPort unless given. It is not
	// used with ControlPlaneEndpointVariableAnnotation.
	ControlPlaneEndpointPortAnnotation = "ipam-bridge.github.io/control-plane-endpoint-port"
	// ControlPlaneEndpointVariableAnnotation names a variable of the
	// Cluster's ClusterClass that gets the address, as a JSON string, in
	// spec.topology.variables, instead of spec.controlPlaneEndpoint.
	ControlPlaneEndpointVariableAnnotation = "ipam-bridge.github.io/control-plane-endpoint-variable"

	// DefaultControlPlaneEndpointPort is the API server's usual port.
	DefaultControlPlaneEndpointPort = 6443
)

// KeepAddressFinalizer on an IPAddressClaim keeps its address reserved
// while the claim is being deleted: the provider releases nothing, and
// keeps the claim's IPAddress, until the finalizer is gone. The provider
// puts it on a control-plane endpoint's claim and removes it once the
// Cluster is gone, or once the Cluster's endpoint no longer names the
// claim's address: a live Cluster's API-server address is never handed to
// a machine because its claim was deleted. Any consumer may use it to keep
// an address it still serves.
const KeepAddressFinalizer = "ipam-bridge.github.io/keep-address"
