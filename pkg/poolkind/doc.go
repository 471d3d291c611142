// Package poolkind says what a pool kind is to the provider: how to make
// its objects, where its credentials are, how to build its backend, whether
// its records carry a machine's MAC, and which addresses its spec names. The
// adapters in cmd/poolkinds fill it in for each kind; the controllers work
// on it alone, so that a new pool kind needs no change in controllers/.
package poolkind
