// Package controllers wires the provider's reconcilers into a manager
// (Setup). Each reconciler lives in a package of its own, and what they
// share in package shared; see docs/architecture.md for the layers, one
// claim's path and what each package may import.
//
//   - claim: the IPAddressClaim reconciler, which owns the Cluster API IPAM
//     contract and asks a pool's backend only to allocate, look up and
//     release;
//   - pool: the pool reconciler (validation, counts, deletion) and the
//     credentials Secrets it caches;
//   - audit: the periodic audit of each pool's records against the claims;
//   - endpoint: a Cluster's control-plane endpoint, claimed like a machine's
//     address;
//   - macaddress: the MAC of a claim's machine, read from the consumers'
//     objects, and the watches that say when it changes;
//   - shared: pool kinds, the backend cache, per-pool accounting, indexes,
//     reasons, the annotations of a reservation, metrics.
package controllers
