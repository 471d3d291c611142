// Package metrics holds the provider's Prometheus metrics: the backends'
// operations and requests, the pools' counts and readiness, the waiting
// claims, the audit's runs and findings, and the counters an alert reads,
// each present at 0 from the start.
package metrics
