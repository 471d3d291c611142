// Package reservation is a reservation as Kubernetes records it: the
// claim's marker and this management cluster's identity, the claim's
// Cluster and whether it is paused, the annotations a reservation leaves on
// an IPAddress, and the condition that says whether the claim's address is
// reserved.
package reservation
