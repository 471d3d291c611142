// Package claim is the IPAddressClaim reconciler: it owns the Cluster API
// IPAM contract and asks a pool's backend only to allocate, look up and
// release. It reads as the contract does:
//
//   - claim_controller.go: the watches and Reconcile (ours? paused? deleted?);
//   - normal.go: a claim that lives gets its IPAddress;
//   - allocate.go, bind.go: the reservation, in the background, and the
//     IPAddress written from its answer;
//   - handover.go, requested.go: an address another claim of this cluster
//     holds, and an address the claim asks for;
//   - delete.go: the release, then the IPAddress and the finalizer;
//   - mac.go, macwrite.go, machinename.go: what the records carry of the
//     machine, and a MAC written once the machine reports it;
//   - ipaddress.go, reservation.go, patch.go: the objects it writes;
//   - watches.go, background.go, holds.go: how it is woken, and held back.
//
// Everything one reconcile knows of its claim travels in a scope.
package claim
