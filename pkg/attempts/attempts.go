// Package attempts counts the attempts a transport makes for one logical
// request, so that the reservation protocol, which knows nothing of HTTP,
// learns when a create went out more than once and may have been applied
// more than once. The HTTP client (pkg/backendhttp) records each attempt
// in the counter its request's context carries.
package attempts

import (
	"context"
	"sync/atomic"
)

// key carries a counter of the attempts made for one logical request.
type key struct{}

// WithCounter returns a context that counts the attempts of the requests
// made with it, and the counter.
func WithCounter(ctx context.Context) (context.Context, *atomic.Int32) {
	n := new(atomic.Int32)
	return context.WithValue(ctx, key{}, n), n
}

// Record counts one attempt of a request made with ctx, if ctx counts.
func Record(ctx context.Context) {
	if n, ok := ctx.Value(key{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}
