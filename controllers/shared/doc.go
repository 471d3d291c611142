// Package shared holds what the provider's reconcilers share, so that none
// of them imports another: what a pool kind is and how its backend is built
// and cached (Backends), the per-pool accounting between claims, pools and
// the audit (InFlight, Alarms, Tombstones), the cache indexes, the
// management cluster's identity, the condition reasons, the annotations a
// reservation leaves on an IPAddress and its claim, the claim's waits and
// holds, and the metrics. It imports no reconciler.
package shared
