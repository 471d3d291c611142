package backendhttp

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the endpoint limiters, labelled by endpoint (scheme, host and
// port: never a path or credential). The manager registers them.
var (
	limiterWaitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capi_ipam_bridge_backend_limiter_wait_seconds",
		Help: "Time each request to an IPAM endpoint waited before being sent: for the endpoint's rate, a free " +
			"concurrency slot, and a pause the endpoint asked for with 429 or 503 and Retry-After.",
		Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"ipam_endpoint"})

	throttledRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_backend_throttled_total",
		Help: "Answers by which an IPAM endpoint throttled the manager (429, or 503 with Retry-After); each pauses every request to the endpoint.",
	}, []string{"ipam_endpoint", "code"})

	requestsInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_backend_requests_in_flight",
		Help: "Requests sent to an IPAM endpoint and not yet answered.",
	}, []string{"ipam_endpoint"})
)

// forgetEndpointMetrics drops the series of an endpoint no pool names.
func forgetEndpointMetrics(key string) {
	labels := prometheus.Labels{"ipam_endpoint": key}
	limiterWaitSeconds.DeletePartialMatch(labels)
	throttledRequests.DeletePartialMatch(labels)
	// requestsInFlight stays: a client holding the endpoint may still have
	// requests out, whose end would make a deleted gauge reappear below 0.
}

// Collectors are the metrics of this package, for the manager to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{limiterWaitSeconds, throttledRequests, requestsInFlight}
}
