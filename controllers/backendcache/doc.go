// Package backendcache builds and caches one backend per pool from its
// kind, its spec and its credentials Secret, and holds a namespaced pool to
// the IPAM endpoints an administrator allowed before the Secret is read.
package backendcache
