package netbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// authorization returns the Authorization header for a token: v2 tokens
// ("nbt_<key>.<secret>", NetBox 4.5+) use Bearer, v1 tokens use Token.
func authorization(token string) string {
	if strings.HasPrefix(token, "nbt_") {
		return "Bearer " + token
	}
	return "Token " + token
}

// newAPIClient returns a go-netbox client over httpClient.
func newAPIClient(cfg *Config, httpClient *http.Client) *netbox.APIClient {
	nc := netbox.NewConfiguration()
	nc.Servers = netbox.ServerConfigurations{{URL: strings.TrimRight(cfg.URL, "/")}}
	nc.HTTPClient = httpClient
	nc.UserAgent = cfg.UserAgent
	nc.AddDefaultHeader("Authorization", authorization(cfg.Token))
	return netbox.NewAPIClient(nc)
}

// getJSON sends a GET the generated client cannot express (custom-field
// filters, vrf_id=null) and decodes the answer into out.
func (d *driver) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	return d.sendJSON(ctx, http.MethodGet, path, query, nil, out)
}

// sendJSON sends a request with body (when not nil) encoded as JSON and
// decodes the answer into out (when not nil). The audit's writes go this way:
// they carry fields, such as an explicit address, that the pool's request
// type has not.
func (d *driver) sendJSON(ctx context.Context, method, path string, query url.Values, body, out any) error {
	_, err := d.send(ctx, method, path, query, body, out, "")
	return err
}

// send is sendJSON with an If-Match precondition (none when ifMatch is
// ""), returning the answer's ETag: NetBox 4.6 and later refuse a write
// to an object that changed since the read that gave ifMatch with 412,
// and earlier releases ignore the header.
func (d *driver) send(ctx context.Context, method, path string, query url.Values, body, out any, ifMatch string) (string, error) {
	u := d.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return "", fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		reader = bytes.NewReader(data)
	}
	op := method + " " + path
	req, err := http.NewRequestWithContext(ctx, method, u, reader)
	if err != nil {
		return "", fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", d.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return "", classify(op, nil, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return "", fmt.Errorf("%w: reading %s: %v", backends.ErrUnavailable, op, err)
	}
	etag := resp.Header.Get("ETag")
	if resp.StatusCode >= 300 {
		refusal := &netboxError{status: resp.StatusCode, body: answer}
		return etag, &answerError{status: resp.StatusCode, detail: errorDetail(resp.StatusCode, refusal), err: classify(op, resp, refusal)}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return etag, nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return etag, fmt.Errorf("decoding %s: %w", op, err)
	}
	return etag, nil
}

// errChangedSinceRead is NetBox's 412 to a write whose If-Match no longer
// names the object's ETag (see conditionally).
var errChangedSinceRead = errors.New("changed since it was read")

// conditionally runs write, which sends r.etag as If-Match. When NetBox
// answers that the record changed since it was read, it reads the record
// again and, while it still carries the marker it was read with, writes
// again: an edit of another field (a description, say) must not stop a
// release, and a record whose marker changed (another cluster's, or the
// IPAM team's, now) is never written (ErrNotOwned). A write that sets the
// marker says so with leaves, the marker it leaves: a record found carrying
// it was written by a resend of a write whose answer was lost; nil for a
// deletion.
func (d *driver) conditionally(ctx context.Context, r ipRecord, leaves *string, write func(ipRecord) error) error {
	return writeConditionally(ctx, d, r, d.getRecord, leaves, write)
}

// writeConditionally is conditionally for any marked object, which get
// reads again by ID.
func writeConditionally[T markedObject](ctx context.Context, d *driver, r T, get func(context.Context, int32) (T, bool, error), leaves *string, write func(T) error) error {
	const attempts = 3
	marker := markerValue(r.fields(), d.cfg.MarkerField)
	for attempt := 1; ; attempt++ {
		err := write(r)
		if !errors.Is(err, errChangedSinceRead) {
			return err
		}
		fresh, found, readErr := get(ctx, r.objectID())
		now := markerValue(fresh.fields(), d.cfg.MarkerField)
		switch {
		case readErr != nil:
			return fmt.Errorf("reading %s again: %w", r, readErr)
		case !found:
			return fmt.Errorf("%w: %s was deleted meanwhile", backends.ErrNotFound, r)
		case leaves != nil && now == *leaves:
			return nil
		case now != marker:
			return fmt.Errorf("%w: NetBox %s changed while it was being written, and now carries %q, not %q; it was left in place",
				backends.ErrNotOwned, r, now, marker)
		case attempt == attempts:
			return fmt.Errorf("%w: NetBox %s changed under each of %d writes: %v", backends.ErrUnavailable, r, attempts, err)
		}
		r = fresh
	}
}

// netboxError is a non-2xx answer from a request built by hand.
type netboxError struct {
	status int
	body   []byte
}

func (e *netboxError) Error() string { return http.StatusText(e.status) }

// classify maps a failed call to the backends error it stands for, keeping
// NetBox's own explanation (its "detail", or the field errors of a 400).
func classify(op string, resp *http.Response, err error) error {
	if resp == nil {
		var oapi *netbox.GenericOpenAPIError
		var verifyErr *tls.CertificateVerificationError
		switch {
		case errors.As(err, &oapi):
			// The request was never sent (the generated client refused it).
			return fmt.Errorf("%s: %w", op, err)
		case errors.As(err, &verifyErr):
			return fmt.Errorf("%w: %s: NetBox's certificate is not trusted (add its CA to the Secret as %q): %v",
				backends.ErrInvalidConfig, op, "ca.crt", verifyErr.Err)
		case errors.Is(err, backendhttp.ErrThrottled):
			return fmt.Errorf("%w: %s: %v", backends.ErrThrottled, op, err)
		}
		return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, op, err)
	}
	detail := errorDetail(resp.StatusCode, err)
	var kind error
	switch status := resp.StatusCode; {
	case status == http.StatusUnauthorized:
		kind = backends.ErrUnauthorized
	case status == http.StatusForbidden:
		// NetBox answers 403 both for a bad token and for a missing permission.
		if strings.Contains(detail, "permission") {
			kind = backends.ErrForbidden
		} else {
			kind = backends.ErrUnauthorized
		}
	case status == http.StatusNotFound:
		kind = backends.ErrNotFound
	case status == http.StatusConflict:
		kind = backends.ErrConflict
	case status == http.StatusPreconditionFailed:
		// The object changed since it was read (If-Match).
		kind = errChangedSinceRead
	case status == http.StatusBadRequest:
		kind = backends.ErrInvalidConfig
	case status == http.StatusTooManyRequests:
		kind = backends.ErrThrottled
	case status >= 500:
		kind = backends.ErrUnavailable
	case status >= 200 && status < 300:
		// A 2xx whose body did not decode.
		return fmt.Errorf("%s: decoding NetBox's answer: %v", op, err)
	default:
		kind = fmt.Errorf("unexpected HTTP status %d", status)
	}
	if detail == "" || resp.StatusCode >= 500 {
		// A server error's body is not an explanation the pool's reader
		// needs, and on a misdirected URL it is some other service's answer.
		return fmt.Errorf("%w: %s: HTTP %d", kind, op, resp.StatusCode)
	}
	return fmt.Errorf("%w: %s: HTTP %d: %s", kind, op, resp.StatusCode, detail)
}

// errorDetail extracts a short human explanation from an error body: what
// NetBox says of a refusal, never a page of something else, at most 300
// characters, since it reaches conditions that tenants read.
func errorDetail(status int, err error) string {
	var body []byte
	var oapi *netbox.GenericOpenAPIError
	var nbe *netboxError
	switch {
	case errors.As(err, &oapi):
		body = oapi.Body()
	case errors.As(err, &nbe):
		body = nbe.body
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var withDetail struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &withDetail) == nil && withDetail.Detail != "" {
		return backends.Truncate(withDetail.Detail, 300)
	}
	if status == http.StatusBadRequest && (body[0] == '{' || body[0] == '[') {
		// Field errors of a 400: keep them compact, they name what to fix.
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			return backends.Truncate(compact.String(), 300)
		}
	}
	// An HTML error page from a proxy says nothing useful beyond the status.
	return ""
}
