// Package subnet gives a ClusterSubnet its subnet and its nodes pool, through
// objects every other part of the provider already serves:
//
//  1. an IPAddressClaim of the parent pool, a pool with childPrefixes, whose
//     IPAddress is the child prefix: the carve, its marker, a lost answer, a
//     restart or clusterctl move are the claim reconciler's and the
//     reservation protocol's, as for any claim;
//  2. the child's gateway, held in the IPAM system by an IPAddressClaim that
//     requests exactly that address from a gateway pool (the child, without
//     a gateway), so that the nodes pool validates and never hands the
//     router's address to a machine;
//  3. the nodes pool, of the parent's kind, whose only source is the child.
//
// Each is made only after the one before it is bound, and each claim keeps
// its record (api/v1alpha1.KeepAddressFinalizer) until the ClusterSubnet
// lets it go. Deleting the ClusterSubnet goes the other way: the nodes pool
// first, which waits for every address of it to be released, then the
// gateway, then the child.
package subnet
