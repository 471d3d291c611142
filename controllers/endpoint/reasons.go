package endpoint

// Reasons of the events on a Cluster that opted in. A Cluster's conditions
// are Cluster API's own, so the provider reports with events only.
const (
	// InvalidControlPlaneEndpointConfigReason (Warning): an annotation of
	// the opt-in is malformed (the pool not <Kind>/<name>, a port outside
	// 1..65535, an empty variable name) or asks for a topology variable on
	// a Cluster without a topology; no address is claimed.
	InvalidControlPlaneEndpointConfigReason = "InvalidControlPlaneEndpointConfig"
	// ControlPlaneEndpointPoolNotFoundReason (Warning): the API server
	// serves no such pool kind, or the pool (of this provider) does not
	// exist; no address is claimed, and the Cluster is looked at again.
	ControlPlaneEndpointPoolNotFoundReason = "ControlPlaneEndpointPoolNotFound"
	// ControlPlaneEndpointVariableUndefinedReason (Warning): the Cluster's
	// ClusterClass does not define the variable the opt-in names, or does
	// not exist; no address is claimed, and the Cluster is looked at again.
	ControlPlaneEndpointVariableUndefinedReason = "ControlPlaneEndpointVariableUndefined"
	// ControlPlaneEndpointAlreadySetReason (Warning): the endpoint's place
	// (spec.controlPlaneEndpoint.host, or the variable) holds a value that
	// is not the claimed address; the provider never overwrites it.
	ControlPlaneEndpointAlreadySetReason = "ControlPlaneEndpointAlreadySet"
	// ControlPlaneEndpointClaimConflictReason (Warning): an IPAddressClaim
	// with the name of the endpoint's claim exists and is not the
	// Cluster's; it is left alone.
	ControlPlaneEndpointClaimConflictReason = "ControlPlaneEndpointClaimConflict"
	// ControlPlaneEndpointClaimedReason (Normal): the endpoint's claim was
	// created.
	ControlPlaneEndpointClaimedReason = "ControlPlaneEndpointClaimed"
	// ControlPlaneEndpointSetReason (Normal): the claimed address was
	// written into the endpoint's place.
	ControlPlaneEndpointSetReason = "ControlPlaneEndpointSet"
	// ControlPlaneEndpointWaitingReason (Warning): the endpoint's claim has
	// no address yet and says why (its Ready reason and message: the pool
	// is exhausted, not ready, refuses the credentials, or a hand-picked
	// address is held by another record or lies outside the pool);
	// repeated, with a backoff to 30 minutes, while the wait lasts.
	ControlPlaneEndpointWaitingReason = "ControlPlaneEndpointWaiting"
	// ControlPlaneEndpointKeptReason (Warning): the endpoint's claim was
	// deleted while the Cluster's endpoint still names its address: the
	// address stays reserved until the Cluster is deleted or its endpoint
	// names another address.
	ControlPlaneEndpointKeptReason = "ControlPlaneEndpointKept"
	// ControlPlaneEndpointReleasedReason (Normal): the endpoint's claim was
	// deleted and the Cluster's endpoint does not name its address: it is
	// released.
	ControlPlaneEndpointReleasedReason = "ControlPlaneEndpointReleased"
)
