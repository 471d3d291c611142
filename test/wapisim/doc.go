// Package wapisim is an in-process Infoblox NIOS grid master answering the
// subset of WAPI (the Infoblox REST API, versions 1.0 … 2.13) that the
// Infoblox IPAM backend uses, the way NIOS does: versioned paths, opaque
// references, default and requested return fields, searches (extensible
// attributes included), next-available-IP allocation, NIOS's error bodies
// and its httpd's HTML pages. Infoblox NIOS is proprietary, so this
// simulator is what the backend is tested against; its tests drive it with
// raw HTTP and with github.com/infobloxopen/infoblox-go-client/v2 v2.12.0,
// and its fidelity suite (test/wapisim/fidelity, test/wapifidelity) with
// v2.12.0 and v2.11.0. It answers as the WAPI 2.12 reference documents.
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
// networkview, network, ipv6network, networkcontainer,
// ipv6networkcontainer, range, ipv6range, fixedaddress, ipv6fixedaddress,
// record:host, extensibleattributedef, zone_auth, view (DNS views), grid
// (read only) and the computed ipv4address/ipv6address. GET searches,
// GET/PUT/DELETE by reference, POST creates (with func:nextavailableip or
// the _object_function form in address fields, and
// func:nextavailablenetwork or the next_available_network object function
// in the network field of networks and containers, which carves a child of
// a container in the same request: netcarve.go). A container's
// POST <ref>?_function=next_available_network lists candidates; deleting a
// container deletes what it holds unless remove_subnets=false.
//
// # Request object
//
// POST /wapi/vX/request runs one operation (a JSON object) or a list of
// them, each {"method", "object", "data", "args"} and, in a list,
// "enable_substitution", "assign_state" and "discard"; methods GET, POST,
// PUT, DELETE, and STATE:ASSIGN and STATE:DISPLAY in a list. GET search
// fields come in data (as in the reference's examples) or args; args carry
// what the URI of the plain call would (_return_fields, _return_fields+,
// _max_results, ...). The operations run in order under the server lock as
// one transaction: if one fails, the earlier ones are undone and the answer
// is the failing operation's error. One operation is answered as the plain
// call; a list with 200 and the list of the results not discarded.
// func:nextavailableip in several POSTs of one request hands out distinct
// addresses. Faults, latency and call counting apply to the HTTP request,
// so one request object is one call. See request.go for the best guesses.
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
// processes; Fault.BodyContains tells apart request objects by their
// operations), SetLatency for every request, Calls/ResetCalls,
// CountCalls(method, pathPrefix) and CountObjectCalls(method, objtype),
// which ignores the WAPI version.
//
// # Query parameters
//
// _return_fields and _return_fields+ may be repeated: every occurrence
// counts, as if listed with commas (WAPI reference). Search arguments may
// be repeated: an object matches if any value matches ("!=" if none
// does). Modifiers: '!', ':' and one of '~', '<', '>' before '='; '*'
// before a name searches an extensible attribute. _max_results (negative:
// error beyond the limit; default -1000), _paging with _return_as_object
// and _page_id, _proxy_search (GM or LOCAL), _return_type (json,
// json-pretty), _inheritance (ignored) and _schema are understood.
//
// # Known gaps
//
// What the simulator does not do, and what a real grid answers instead:
//
//   - Object types: only those listed under Objects (and grid, with only
//     its name). Any other type gets "Unknown object type", where NIOS
//     would answer it. Object functions (_function=…, e.g. grid
//     restartservices, network next_available_ip as a function call) are
//     not simulated, but for a container's next_available_network; only
//     func:nextavailableip in address fields, func:nextavailablenetwork in
//     network fields and the _object_function forms are. A network created
//     inside another network is kept beside it here; NIOS turns the outer
//     one into a container. func:nextavailablenetwork names its container
//     by CIDR only (not by reference), and the texts of a missing
//     container and of a prefix length not longer than the container's are
//     best guesses.
//   - Fields: each object has the fields in schema.go. NIOS has many more
//     (creation_time, disable, ddns_*, discovered_data, …); asking for
//     one gets "Unknown argument/field" here and its value on NIOS.
//     Searchable fields are those in schema.go; NIOS documents more
//     (record:host alias, dns_name, creator; network contains_address,
//     ipv4addr, unmanaged; ipv4address ip_address '~=', usage, is_conflict;
//     …), which get "Field is not searchable" or "Unknown argument/field"
//     here. Nested return fields (ipv4addrs.mac style) are not simulated.
//   - Repeated search arguments are alternatives (OR) here. The reference
//     does not say how NIOS combines them per field type; for list-valued
//     (multi-value) extensible attributes NIOS may require all values.
//   - Extensible attributes: no inheritance (_inheritance is ignored; NIOS
//     would return inherited values with it), no multi-value attributes,
//     no DATE, EMAIL, URL or ENUM validation; '<=' and '>=' work on
//     INTEGER attributes only (NIOS also on DATE). Search on an undefined
//     attribute answers "Unknown extensible attribute" (best-guess text).
//   - Other options given twice (_max_results=1&_max_results=2): the last
//     wins here; NIOS's behaviour is not documented.
//   - _return_type=xml and xml-pretty, _schema_version, _schema_searchable
//     and _get_doc are refused with "… is not supported by the WAPI
//     simulator" (AdmConProtoError); NIOS answers them. _schema answers
//     field names, supports and searchable_by only: no field types,
//     is_array, doc or function lists, and supported_versions without
//     patch versions (NIOS lists e.g. 2.12.3).
//   - Paging: a page id is good for one request and expires after
//     SetPageTTL (10 minutes by default, a best guess: NIOS documents
//     expiry but no duration); the texts of paging errors are best guesses.
//   - Error texts marked "best guess" in errors.go and search.go (invalid
//     values, modifier errors, read-only fields, page ids, not-allowed
//     operations) are modelled on sourced ones; NIOS's wording may differ,
//     its status and code (400, Client.Ibap.Proto) should not.
//   - Request object: assign_state takes top-level fields and "*EA" only
//     (not "ipv4addrs[1]" array members); scheduling and approval
//     arguments in args are refused like any unknown argument.
//   - Not simulated at all: scheduling (_schedinfo), approval workflows,
//     the fileop object, CSV import/export, permissions
//     beyond write/superuser, DNS and DHCP services (restarts, leases,
//     conflicts: is_conflict is always false), discovery, cloud API
//     ownership (cloud_info is a fixed default), multiple grid members
//     (_proxy_search=LOCAL answers as the grid master), and XML bodies.
//   - MACs: a fixed address's mac must be six hex pairs (':' or '-'), and
//     no two fixed addresses of one network may carry the same MAC (the
//     zero MAC of reservations excepted), on create and update, with NIOS
//     8.2's text ("MAC address … is used in two fixed addresses … and …,
//     which are in the same network …"); its error class is a best guess.
//     DHCP-enabled host addresses are not checked against fixed addresses'
//     MACs, which NIOS may do.
//   - Host records answer mac in ipv4addrs only when one is set, and
//     network members as an empty list; NIOS fills DHCP defaults there.
//
// Note that infoblox-go-client v2.12.0 retries every failed request once
// (with _proxy_search=GM on searches) and repeats a search that found
// nothing, so one client call may be two WAPI calls.
package wapisim
