// Package pool is the pool reconciler, one per pool kind: it validates a
// pool against its IPAM system, keeps its counts and Ready condition, and
// lets a deleted pool go only when no claim may hold a reservation in it.
// The Secret reconciler beside it keeps the credentials Secrets the pools
// name labelled, so that the manager caches those and no others.
package pool
