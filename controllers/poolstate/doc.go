// Package poolstate is what the manager remembers of each pool between
// its reconcilers: the reservations in flight (InFlight), the refusals that
// ask for a revalidation (Alarms), the tombstones due for deletion
// (Tombstones), and the sweeps for records a create may still leave late
// (LateRecords); each wakes the reconciler that acts on it.
package poolstate
