// Package upkeep marks the requests a pool's upkeep sends to its IPAM
// system (its validation, its counts, its audits), so that the transport
// (pkg/backendhttp) lets the requests of claims waiting for an address go
// first: in a fleet's roll-out, every new pool's validation and first audit
// would otherwise queue ahead of the carves and reservations that machines
// wait for. The protocol and the drivers know nothing of it; the
// controllers mark the contexts of the work that is upkeep.
package upkeep

import "context"

type key struct{}

// With returns a context whose requests are upkeep.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, true)
}

// Without returns a context whose requests are not upkeep, for work that
// starts as upkeep but that claims wait for too: a setup check or a
// preparation they share, an address a machine uses held again.
func Without(ctx context.Context) context.Context {
	if !Is(ctx) {
		return ctx
	}
	return context.WithValue(ctx, key{}, false)
}

// Is says whether the requests of ctx are upkeep.
func Is(ctx context.Context) bool {
	v, _ := ctx.Value(key{}).(bool)
	return v
}
