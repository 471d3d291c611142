// Package index sets up the cache indexes the reconcilers look claims and
// addresses up by (a pool reference, an address in its IPAM scope), and the
// mappings from a claim or an address to its pool.
package index
