// Package audit is the audit reconciler: every interval it lists each
// pool's records in its IPAM system and judges them against the claims of
// this management cluster (orphans, duplicates, strays, drift), repairs
// what is the provider's own, and reports the rest (docs/audit.md).
package audit
