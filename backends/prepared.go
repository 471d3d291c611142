package backends

import (
	"context"
	"sync"
)

// Prepared holds what a backend resolves when it validates (its sources, the
// IDs its requests name), so that operations reuse it. The first operation
// after a start validates once, however many run at once.
type Prepared[T any] struct {
	first sync.Mutex // makes the first preparation single-flight
	mu    sync.Mutex // guards val and ok
	val   T
	ok    bool
}

// Set stores the result of a successful validation.
func (p *Prepared[T]) Set(v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.val, p.ok = v, true
}

func (p *Prepared[T]) load() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.val, p.ok
}

// Get returns the stored result, running validate (which must call Set on
// success) when there is none yet.
func (p *Prepared[T]) Get(ctx context.Context, validate func(context.Context) error) (T, error) {
	if v, ok := p.load(); ok {
		return v, nil
	}
	p.first.Lock()
	defer p.first.Unlock()
	if v, ok := p.load(); ok {
		return v, nil
	}
	if err := validate(ctx); err != nil {
		var zero T
		return zero, err
	}
	v, _ := p.load()
	return v, nil
}
