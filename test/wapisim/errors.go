package wapisim

import (
	"fmt"
	"net/http"
	"net/netip"
)

// wapiError is NIOS's JSON error body. NIOS writes it pretty-printed with
// the keys in this order ({ "Error": ..., "code": ..., "text": ... }); the
// "Error" member is "<Class>: <text>", or for errors raised by the database
// layer "AdmConDataError: None (<IBClass>: <IBCode>:<text>)".
type wapiError struct {
	status int
	class  string // the "Error" member
	code   string
	text   string
}

// Response codes of the WAPI error body, as seen in the sources cited below.
const (
	codeProto        = "Client.Ibap.Proto"
	codeData         = "Client.Ibap.Data"
	codeDataConflict = "Client.Ibap.Data.Conflict"
	codeDataNotFound = "Client.Ibap.Data.NotFound"
)

// errProto is a protocol (request syntax) error: 400 AdmConProtoError,
// Client.Ibap.Proto. Seen for unknown object types, unknown fields, fields
// that are not searchable, unknown extensible attributes and oversized
// result sets (infoblox-go-client#48, #73; terraform-provider-infoblox#48,
// #62, #169; hashicorp/terraform-provider-infoblox#5; pyinfoblox#2).
func errProto(format string, args ...any) wapiError {
	text := fmt.Sprintf(format, args...)
	return wapiError{http.StatusBadRequest, "AdmConProtoError: " + text, codeProto, text}
}

// errConflict is the database layer's conflict error: 400, e.g. "The record
// 'x' already exists." (infoblox-client#68), "The action is not allowed. A
// parent was not found." (scoulomb/myk8s, Infoblox error study), "The
// network 192.168.1.0/24 already exists.  Select another network."
func errConflict(format string, args ...any) wapiError {
	text := fmt.Sprintf(format, args...)
	return wapiError{http.StatusBadRequest,
		"AdmConDataError: None (IBDataConflictError: IB.Data.Conflict:" + text + ")", codeDataConflict, text}
}

// errData is the database layer's generic data error: 400, as for an
// exhausted network (theforeman/smart_proxy_dhcp_infoblox#6:
// "AdmConDataError: None (IBDataError: IB.Data:Cannot find 1 available IP
// address(es) in this network.)", code Client.Ibap.Data).
func errData(format string, args ...any) wapiError {
	text := fmt.Sprintf(format, args...)
	return wapiError{http.StatusBadRequest, "AdmConDataError: None (IBDataError: IB.Data:" + text + ")", codeData, text}
}

// errNotFound is 404 AdmConDataNotFoundError, Client.Ibap.Data.NotFound:
// "Reference <ref> not found" for unknown references (scoulomb/myk8s curl
// transcript against WAPI 2.5) and "View default not found" for a missing
// DNS view (theforeman/smart_proxy_dhcp_infoblox#38, status 404). The
// go client turns any 404 into an *ibclient.NotFoundError.
func errNotFound(format string, args ...any) wapiError {
	text := fmt.Sprintf(format, args...)
	return wapiError{http.StatusNotFound, "AdmConDataNotFoundError: " + text, codeDataNotFound, text}
}

// The texts used by the simulator, in one place so tests and readers can
// find them. Those without a source above are best guesses, as marked.

func errUnknownObjectType(t string) wapiError { return errProto("Unknown object type (%s)", t) }

// errUnknownField: NIOS quotes the name (pyinfoblox/Granicus infoblox #22:
// "Unknown argument/field: 'extensible_attributes'").
func errUnknownField(f string) wapiError { return errProto("Unknown argument/field: '%s'", f) }

func errNotSearchable(f string) wapiError { return errProto("Field is not searchable: %s", f) }

func errUnknownEA(name string) wapiError { return errProto("Unknown extensible attribute: %s", name) }

func errTooLarge(limit int) wapiError { return errProto("Result set too large (> %d)", limit) }

func errRefNotFound(ref string) wapiError { return errNotFound("Reference %s not found", ref) }

func errParentNotFound() wapiError {
	return errConflict("The action is not allowed. A parent was not found.")
}

func errDNSViewNotFound(v string) wapiError { return errNotFound("View %s not found", v) }

func errHostExists(name string) wapiError {
	return errConflict("The record '%s' already exists.", name)
}

// errNoFreeIP: the network text is sourced (see errData); for ranges NIOS
// says "range" (best guess by analogy).
func errNoFreeIP(n int, container string) wapiError {
	return errData("Cannot find %d available IP address(es) in this %s.", n, container)
}

// errNetworkNotFound answers func:nextavailableip for a network that does
// not exist in the view. Best guess, modelled on "View default not found".
func errNetworkNotFound(cidr, view string) wapiError {
	return errNotFound("Network %s in network view %s not found", cidr, view)
}

// errNoFreeNetwork: a full network container (infoblox-ansible#156:
// "AdmConDataError: None (IBDataError: IB.Data:Can not find requested
// number of networks)", code Client.Ibap.Data; "Can not", as NIOS writes it).
func errNoFreeNetwork() wapiError { return errData("Can not find requested number of networks") }

// errContainerNotFound answers func:nextavailablenetwork for a container
// that does not exist in the view. Best guess, as errNetworkNotFound.
func errContainerNotFound(cidr, view string) wapiError {
	return errNotFound("Network container %s in network view %s not found", cidr, view)
}

// errNetworkViewNotFound: best guess, modelled on "View default not found".
func errNetworkViewNotFound(v string) wapiError { return errNotFound("Network view %s not found", v) }

// errIPInUse: a second DHCP object (fixed address, DHCP-enabled host
// address) at an address in the same network view. Best guess text.
func errIPInUse(ip fmt.Stringer, view string) wapiError {
	return errConflict("The IP address %s is already in use by a fixed address in network view %s.", ip, view)
}

// errMACInUse: a second fixed address with the same MAC in one network.
// The text is NIOS 8.2's (ansible/ansible#58708: "MAC address
// 08:6d:41:e8:fd:e8 is used in two fixed addresses 192.168.10.1 and
// 192.168.10.1, which are in the same network 192.168.10.0/24."); the error
// class around it (a database conflict) is a best guess.
func errMACInUse(mac string, held, wanted netip.Addr, network netip.Prefix) wapiError {
	return errConflict("MAC address %s is used in two fixed addresses %s and %s, which are in the same network %s.", mac, held, wanted, network)
}

// errEAExists: best guess, following "The network ... already exists.".
func errEAExists(name string) wapiError {
	return errConflict("Extensible attribute definition %s already exists.", name)
}

// errInvalidValue covers malformed field values (addresses, CIDRs, bools).
// Best guess text; NIOS reports such problems as AdmConProtoError.
func errInvalidValue(field string, v any) wapiError {
	return errProto("Invalid value for %s: %v", field, v)
}

// errRequired: a required field is missing on create. Best guess text.
func errRequired(field string) wapiError { return errProto("Field %s is required", field) }

// errNotSimulated answers a request that is valid WAPI but that the
// simulator does not implement (listed in doc.go). NIOS would answer it;
// the simulator refuses rather than answer differently.
func errNotSimulated(what string) wapiError {
	return errProto("%s is not supported by the WAPI simulator", what)
}
