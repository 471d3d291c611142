// Package retry is how long a waiting claim or pool waits before it looks
// again: a backoff per object, and the work queues' rate limiter.
package retry
