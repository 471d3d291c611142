package infoblox

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// requestor is infoblox-go-client's HttpRequestor over our HTTP client, bound
// to one operation's context. The client's Connector methods take no context,
// so each operation gets its own Connector with a requestor carrying it.
type requestor struct {
	ctx    context.Context
	client *http.Client
}

var _ ibclient.HttpRequestor = (*requestor)(nil)

// Init ignores the client's transport settings: TLS and timeouts are ours.
func (r *requestor) Init(ibclient.AuthConfig, ibclient.TransportConfig) {}

// SendRequest sends req and returns the body of a 200 (or a 201 to a POST).
// Any other answer becomes a *wapiError, typed from WAPI's error body: the
// client itself types only 404 and hands back everything else as a string.
func (r *requestor) SendRequest(req *http.Request) ([]byte, error) {
	req = req.WithContext(r.ctx)
	op := describe(req)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, transportError(op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: reading the answer: %v", backends.ErrUnavailable, op, err)
	}
	if resp.StatusCode == http.StatusOK || (resp.StatusCode == http.StatusCreated && req.Method == http.MethodPost) {
		return body, nil
	}
	return nil, newWAPIError(op, resp.StatusCode, body)
}

// describe names a request for errors and logs: method and object type or
// reference, never the query (it may hold the marker, which is harmless, but
// keeps messages short) and never credentials.
func describe(req *http.Request) string {
	path := req.URL.Path
	if i := strings.Index(path, "/wapi/v"); i >= 0 {
		rest := path[i+len("/wapi/v"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			path = rest[j+1:]
		}
	}
	return req.Method + " " + path
}

func transportError(op string, err error) error {
	var verifyErr *tls.CertificateVerificationError
	if errors.As(err, &verifyErr) {
		return fmt.Errorf("%w: %s: the grid's certificate is not trusted (add its CA to the Secret as %q): %v",
			backends.ErrInvalidConfig, op, "ca.crt", verifyErr.Err)
	}
	if errors.Is(err, backendhttp.ErrThrottled) {
		return fmt.Errorf("%w: %s: %v", backends.ErrThrottled, op, err)
	}
	return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, op, err)
}

// wapiError is a WAPI answer other than success. NIOS's error body is
// {"Error": "<class>: <text>", "code": "<code>", "text": "<text>"}.
type wapiError struct {
	op     string
	status int
	class  string // e.g. AdmConProtoError
	code   string // e.g. Client.Ibap.Proto
	text   string
	kind   error
}

func (e *wapiError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", e.op, e.status)
	// A server error's text is not an explanation the pool's reader needs,
	// and on a misdirected host it is some other service's answer.
	if e.text != "" && e.status < 500 {
		msg += ": " + e.text
	}
	return msg
}

func (e *wapiError) Unwrap() error { return e.kind }

// exhaustedText is NIOS's answer when a network or range has no free address,
// e.g. "Cannot find 1 available IP address(es) in this network".
// A full network container answers "Can not find requested number of
// networks" to a carve.
var exhaustedText = regexp.MustCompile(`(?i)cannot find \d+ available IP address|can not find requested number of networks`)

func newWAPIError(op string, status int, body []byte) *wapiError {
	e := &wapiError{op: op, status: status}
	var parsed struct {
		Error string `json:"Error"`
		Code  string `json:"code"`
		Text  string `json:"text"`
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &parsed) == nil {
		e.code, e.text = parsed.Code, parsed.Text
		if class, text, ok := strings.Cut(parsed.Error, ": "); ok {
			e.class = class
			if e.text == "" {
				e.text = text
			}
		} else if e.text == "" {
			e.text = parsed.Error
		}
	}
	e.text = backends.Truncate(strings.TrimSpace(e.text), 300)
	e.kind = classify(e)
	return e
}

// classify maps a WAPI error to the backends error it stands for. NIOS
// answers most refusals with 400 and says what happened in the error class
// and text.
func classify(e *wapiError) error {
	text := e.class + ": " + e.text
	switch {
	case e.status == http.StatusUnauthorized:
		return backends.ErrUnauthorized
	case e.status == http.StatusForbidden:
		return backends.ErrForbidden
	case e.status == http.StatusNotFound:
		return backends.ErrNotFound
	case e.status == http.StatusTooManyRequests:
		return backends.ErrThrottled
	case e.status >= 500:
		return backends.ErrUnavailable
	case exhaustedText.MatchString(text):
		return backends.ErrExhausted
	case strings.Contains(strings.ToLower(text), "permission"):
		return backends.ErrForbidden
	case e.class == "AdmConDataNotFoundError":
		return backends.ErrNotFound
	case macInUseText.MatchString(text):
		return backends.ErrMACAddressInUse
	case strings.Contains(text, "IBDataConflictError") || strings.Contains(text, "already"):
		return backends.ErrConflict
	case e.status == http.StatusBadRequest:
		return backends.ErrInvalidConfig
	}
	return fmt.Errorf("unexpected HTTP status %d", e.status)
}

// wapiObject names an object type for the client's request builder.
type wapiObject struct {
	ibclient.IBBase
	objectType string
}

func (o *wapiObject) ObjectType() string { return o.objectType }

func newObject(objectType string, returnFields ...string) *wapiObject {
	o := &wapiObject{objectType: objectType}
	o.SetReturnFields(returnFields)
	return o
}

// get sends one GET (a search when ref is empty, else a read of ref) and
// decodes the answer into out. It does not go through Connector.GetObject,
// which repeats every search that found nothing with _proxy_search=GM and so
// doubles the cost of each miss.
func (d *driver) get(ctx context.Context, obj *wapiObject, ref string, search map[string]string, out any) error {
	var params *ibclient.QueryParams
	if ref == "" {
		params = ibclient.NewQueryParams(false, search)
	}
	req, err := d.builder.BuildRequest(ibclient.GET, obj, ref, params)
	if err != nil {
		return fmt.Errorf("building a WAPI request for %s: %w", obj.objectType, err)
	}
	body, err := (&requestor{ctx: ctx, client: d.http}).SendRequest(req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the answer to %s: %w", describe(req), err)
	}
	return nil
}

// create POSTs obj and returns the object made, with returnFields: WAPI
// answers a POST with the object when _return_fields is given, which saves
// reading it back. The client's Connector.CreateObject sends no return
// fields, so the request is built by the client and sent here.
func (d *driver) create(ctx context.Context, obj ibclient.IBObject, returnFields []string) (object, error) {
	req, err := d.builder.BuildRequest(ibclient.CREATE, obj, "", nil)
	if err != nil {
		return object{}, fmt.Errorf("building a WAPI request for %s: %w", obj.ObjectType(), err)
	}
	q := req.URL.Query()
	q.Set("_return_fields", strings.Join(returnFields, ","))
	req.URL.RawQuery = q.Encode()
	body, err := (&requestor{ctx: ctx, client: d.http}).SendRequest(req)
	if err != nil {
		return object{}, d.explainMACInUse(ctx, obj, err)
	}
	var created object
	if err := json.Unmarshal(body, &created); err != nil || created.Ref == "" {
		return object{}, fmt.Errorf("%w: %s: the grid answered without the object made (%v)", backends.ErrUnavailable, describe(req), err)
	}
	return created, nil
}

// connector returns an infoblox-go-client Connector bound to ctx, for the
// marker definition only: its Connector resends every failed request once
// (see records.go), which a creation that answers a conflict the second
// time can bear; writes to objects go through guarded.go.
func (d *driver) connector(ctx context.Context) (*ibclient.Connector, error) {
	return ibclient.NewConnector(d.hostCfg, d.authCfg, ibclient.TransportConfig{},
		&ibclient.WapiRequestBuilder{}, &requestor{ctx: ctx, client: d.http})
}

// eaValues decodes "extattrs": {"Name": {"value": ...}}.
type eaValues map[string]struct {
	Value any `json:"value"`
}

func (e eaValues) get(name string) string {
	v, ok := e[name]
	if !ok || v.Value == nil {
		return ""
	}
	switch val := v.Value.(type) {
	case string:
		return val
	case float64:
		return strconv.FormatFloat(val, 'f', -1, 64)
	default:
		return fmt.Sprint(val)
	}
}

// markerOf is the claim's marker an object carries, and whether the IPAM
// team planned it (see backends.PlannedMarker).
func (d *driver) markerOf(o object) (marker string, planned bool) {
	marker, planned = backends.ParsePlanned(o.ExtAttrs.get(d.cfg.MarkerEA))
	return marker, planned
}

// object is a fixed address or a host record as the backend reads it.
type object struct {
	Ref         string   `json:"_ref"`
	Name        string   `json:"name"`
	Network     string   `json:"network"`
	IPv4Addr    string   `json:"ipv4addr"`
	IPv6Addr    string   `json:"ipv6addr"`
	IPv4Addrs   []hostV4 `json:"ipv4addrs"`
	IPv6Addrs   []hostV6 `json:"ipv6addrs"`
	ExtAttrs    eaValues `json:"extattrs"`
	NetworkView string   `json:"network_view"`
	// Mac and MatchClient: an IPv4 fixed address's DHCP match.
	Mac         string `json:"mac"`
	MatchClient string `json:"match_client"`
}

type hostV4 struct {
	IPv4Addr         string `json:"ipv4addr"`
	Mac              string `json:"mac"`
	ConfigureForDHCP bool   `json:"configure_for_dhcp"`
}

type hostV6 struct {
	IPv6Addr string `json:"ipv6addr"`
}

// address is the object's address: a fixed address has one; the host records
// this provider creates have exactly one.
func (o object) address() (netip.Addr, error) {
	var text string
	switch {
	case o.IPv4Addr != "":
		text = o.IPv4Addr
	case o.IPv6Addr != "":
		text = o.IPv6Addr
	case len(o.IPv4Addrs) > 0:
		text = o.IPv4Addrs[0].IPv4Addr
	case len(o.IPv6Addrs) > 0:
		text = o.IPv6Addrs[0].IPv6Addr
	default:
		return netip.Addr{}, fmt.Errorf("object %s holds no address", o.Ref)
	}
	addr, err := netip.ParseAddr(text)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("object %s: address %q: %w", o.Ref, text, err)
	}
	return addr, nil
}

// dhcpMAC is the MAC the grid's DHCP serves the object's address to,
// lower case with colons: an IPv4 fixed address's that matches clients by
// MAC, or the first IPv4 address of a host record, with DHCP on (the one
// address reads); "" for any other, and for the zero MAC of a
// reservation.
func (o object) dhcpMAC() string {
	var mac string
	switch {
	case o.IPv4Addr != "":
		if o.MatchClient == "" || o.MatchClient == "MAC_ADDRESS" {
			mac = o.Mac
		}
	case o.IPv6Addr == "" && len(o.IPv4Addrs) > 0 && o.IPv4Addrs[0].ConfigureForDHCP:
		mac = o.IPv4Addrs[0].Mac
	}
	mac = strings.ToLower(strings.ReplaceAll(mac, "-", ":"))
	if mac == zeroMAC {
		return ""
	}
	return mac
}

// wapiText is the grid's own explanation inside err, if any.
func wapiText(err error) string {
	var we *wapiError
	if errors.As(err, &we) {
		return we.text
	}
	return err.Error()
}
