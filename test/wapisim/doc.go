// Package wapisim is an in-process Infoblox NIOS grid master answering the
// subset of WAPI (the Infoblox REST API, versions 1.0 … 2.13) that the
// Infoblox IPAM backend uses, the way NIOS does: versioned paths, opaque
// references, default and requested return fields, searches (extensible
// attributes included), next-available-IP allocation, NIOS's error bodies
// and its httpd's HTML pages. Infoblox NIOS is proprietary, so this
// simulator is what the backend is tested against; its tests drive it with
// raw HTTP and with github.com/infobloxopen/infoblox-go-client/v2 v2.12.0.
//
// # Server
//
//	s := wapisim.New(wapisim.WithUser("admin", "infoblox", wapisim.Permissions{Write: true, Superuser: true}))
//	defer s.Close()
//
// New serves plain HTTP on 127.0.0.1, NewTLS HTTPS with a generated CA
// (CACertPEM); IssueClientCert signs client certificates (CN = user name)
// for NIOS's certificate-based authentication. URL, Host and Port locate
// the server.
//
// # Users
//
// AddUser registers basic-auth users with Permissions{Write, Superuser}.
// Read-only users get httpd's 403 page on writes; only superusers may
// create extensibleattributedef. Wrong or missing credentials get httpd's
// 401 "Authorization Required" page. A successful login sets the ibapauth
// session cookie, which later requests may present instead of credentials.
//
// # Objects
//
// networkview, network, ipv6network, range, ipv6range, fixedaddress,
// ipv6fixedaddress, record:host, extensibleattributedef, zone_auth, view
// (DNS views) and the computed ipv4address/ipv6address. GET searches,
// GET/PUT/DELETE by reference, POST creates (with func:nextavailableip or
// the _object_function form in address fields).
//
// # Seeding and inspection (no HTTP, no permission checks)
//
// AddNetworkView, AddNetwork, AddRange, AddEADefinition, AddDNSView,
// AddZone, AddFixedAddress, AddHostRecord create objects and return their
// references; Objects, Object and EAs copy stored state; SetEA, RemoveEA
// and DeleteObject change it. OnAllocate registers a hook run after each
// object created with a next-available address, before the response is
// written.
//
// # Faults and counting
//
// InjectFault/ClearFaults (httpfault kinds: FaultStatus answers with the
// httpd's HTML error page, FaultDrop closes without processing,
// FaultLoseResponse processes then closes, FaultLatency sleeps then
// processes), SetLatency for every request, Calls/ResetCalls,
// CountCalls(method, pathPrefix) and CountObjectCalls(method, objtype),
// which ignores the WAPI version.
//
// Note that infoblox-go-client v2.12.0 retries every failed request once
// (with _proxy_search=GM on searches) and repeats a search that found
// nothing, so one client call may be two WAPI calls.
package wapisim
