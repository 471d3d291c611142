package backends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Every pool of a namespace lists the same thing for its strays: every
// record of the namespace's marker prefix, wherever it lies, which it then
// filters by its own sources. A fleet's roll-out audits hundreds of new
// pools within a minute, and a namespace's pools audit every interval,
// each paging through the namespace's whole listing: the IPAM system
// answered the same costly listing once per pool. SharedListing lets the
// pools of one system, credentials and prefix share one listing for a
// short time.

// SharedKey names a shared listing of system by parts, everything its
// answer depends on: the credentials among them appear only hashed.
func SharedKey(system string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return system + ":" + hex.EncodeToString(h.Sum(nil))
}

// sharedRetention is how long a finished listing is kept at most; no
// caller is served one older, whatever it accepts.
const sharedRetention = time.Minute

type sharedEntry struct {
	started time.Time
	done    chan struct{}
	value   any
	err     error
}

var shared = struct {
	mu      sync.Mutex
	entries map[string]*sharedEntry
}{entries: map[string]*sharedEntry{}}

// SharedListing returns list's answer, shared by the callers that give the
// same key: a listing that began at most maxAge ago, finished or under
// way, serves every caller that accepts its age. maxAge 0 always lists,
// and the new listing serves the callers after it. A failed listing serves
// no one: a caller that waited for it lists itself. The key must name
// everything the answer depends on (the system, the credentials, what is
// listed) and the answer must not be changed by its callers.
func SharedListing[T any](ctx context.Context, key string, maxAge time.Duration, list func(context.Context) ([]T, error)) ([]T, error) {
	e, leads := joinListing(key, maxAge)
	if !leads {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if v, ok := e.value.([]T); ok && e.err == nil {
			return v, nil
		}
		e, _ = joinListing(key, 0)
	}
	return finishListing(ctx, key, e, list)
}

// finishListing makes the listing e and hands it to those who wait for it; a
// listing that panicked fails them, so that none waits for ever.
func finishListing[T any](ctx context.Context, key string, e *sharedEntry, list func(context.Context) ([]T, error)) (v []T, err error) {
	err = errors.New("the listing did not finish")
	defer func() {
		e.value, e.err = v, err
		close(e.done)
		if err != nil {
			shared.mu.Lock()
			if shared.entries[key] == e {
				delete(shared.entries, key)
			}
			shared.mu.Unlock()
		}
	}()
	v, err = list(ctx)
	return v, err
}

// joinListing returns the key's listing that began at most maxAge ago, or
// a new one that the caller leads (lead) and must finish. It drops the
// finished listings no caller may take any more.
func joinListing(key string, maxAge time.Duration) (e *sharedEntry, lead bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	now := time.Now()
	for k, old := range shared.entries {
		if now.Sub(old.started) > sharedRetention {
			select {
			case <-old.done:
				delete(shared.entries, k)
			default:
			}
		}
	}
	if old, ok := shared.entries[key]; ok && maxAge > 0 && now.Sub(old.started) <= min(maxAge, sharedRetention) {
		return old, false
	}
	e = &sharedEntry{started: now, done: make(chan struct{})}
	shared.entries[key] = e
	return e, true
}
