// Package reasons turns a backend's errors into the reasons of the pools'
// and the claims' conditions (listed in docs/troubleshooting.md).
package reasons
