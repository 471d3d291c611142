// Package controllers wires the provider's reconcilers into a manager
// (Setup). Each reconciler lives in a package of its own, and what two of
// them share lives in small packages of one job each, which import no
// reconciler; see docs/architecture.md for the layers, one claim's path and
// what each package may import.
//
// The reconcilers:
//   - claim: the IPAddressClaim reconciler, which owns the Cluster API IPAM
//     contract and asks a pool's backend only to allocate, look up and
//     release;
//   - pool: the pool reconciler (validation, counts, deletion) and the
//     credentials Secrets it caches;
//   - audit: the periodic audit of each pool's records against the claims;
//   - endpoint: a Cluster's control-plane endpoint, claimed like a machine's
//     address;
//   - macaddress: the MAC of a claim's machine, read from the consumers'
//     objects, and the watches that say when it changes.
//
// What they share:
//   - backendcache: one backend per pool, built from its kind (pkg/poolkind),
//     spec and Secret, and cached;
//   - poolstate: what the manager remembers of each pool between reconcilers
//     (reservations in flight, refusals, tombstones, late-record sweeps);
//   - reservation: a reservation as Kubernetes records it (the marker, the
//     claim's Cluster, the IPAddress's annotations);
//   - index, owners, reasons, retry, metrics: the cache indexes, the
//     owner-chain walk, the conditions' reasons, the waits, the metrics.
package controllers
