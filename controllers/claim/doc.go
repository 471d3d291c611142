// Package claim is the IPAddressClaim reconciler: it owns the Cluster API
// IPAM contract and asks a pool's backend only to allocate, look up and
// release. It reads as the contract does, from the top down; no file uses
// one above it:
//
//   - controller.go: the watches, and Reconcile (ours? paused? deleted?),
//     which writes what the phases concluded in one patch at its end;
//   - normal.go and delete.go: the phases of a claim that lives and of one
//     being deleted, each a short list over one scope (scope.go);
//   - reserve.go, bind.go: the reservation, in the background, and the
//     IPAddress written from its answer; address.go, pool.go,
//     finalizer.go: the claim's IPAddress as found, the pool's state, the
//     release finalizer first;
//   - handover.go, requested.go, request.go, secondwriter.go: an address
//     another claim of this cluster holds, an address the claim asks for,
//     a reservation another writer made first;
//   - release.go, kept.go, refused.go: the release, an address its
//     consumer keeps, a refused reservation;
//   - mac.go, macwrite.go, machinename.go: what the records carry of the
//     machine, and a MAC written once the machine reports it;
//   - ipaddress.go, reservation.go, patch.go, claims.go: the objects it
//     writes;
//   - reconciler.go, watches.go, background.go, holds.go: the reconciler's
//     state, how it is woken, and held back.
//
// A phase returns next or stop(result); it says what it concluded of the
// claim's conditions through the scope, never on the claim: Reconcile sets
// them once, when the reconcile ends.
package claim
