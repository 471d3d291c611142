// Package macaddress finds the MAC of a claim's machine for pools whose
// fixed addresses carry it: it follows the claim's owners to the object
// that holds the MAC (a Metal3 BareMetalHost, a CAPV VSphereVM), remembers
// which object each claim read it from, and watches those objects' kinds,
// started when a claim first needs one, so that a MAC that appears or
// changes wakes its claims.
package macaddress
