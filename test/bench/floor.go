package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// The real NetBox's floor (issue 24): the least time that server needs for
// a burst's records, whatever the client. NetBox serialises every
// available-ips POST under one advisory lock for the whole server, so no
// provider binds a burst faster than one plain client that, with nothing
// else running, POSTs the same records in lists of --max-batch-size one
// after another; and none releases it faster than that client's bulk
// DELETEs of the same lists. The client here is go-netbox's for the POSTs
// (the request type and encoding the provider's NetBox backend uses) and
// net/http for the DELETEs; it shares no code with the provider.

// The provider's defaults for what it writes on every record
// (backends/netbox: DefaultTag, DefaultMarkerField, the default status and
// DefaultDescriptionPattern), copied, not imported, so that the floor stays
// a client of its own.
const (
	floorTag         = "cluster-api-ipam"
	floorMarkerField = "capi_ipam_claim"
	floorStatus      = "active"
)

// floorDescription is the provider's default description of a claim with
// no cluster, as the bench's claims are.
func floorDescription(namespace, name string) string {
	return "Cluster API claim " + namespace + "/" + name
}

// netboxFloor is what the real NetBox alone needed for one burst's records.
type netboxFloor struct {
	records, batch int
	// create is the time to POST every record to available-ips; delete, to
	// delete them all again.
	create, delete time.Duration
	createRequests int
	deleteRequests int
}

// floorClient is a plain client of the real NetBox of NETBOX_URL, with
// the write token the bench's proxy hands the provider.
type floorClient struct {
	base, auth string
	http       *http.Client
	api        *netbox.APIClient
}

func newFloorClient() (*floorClient, error) {
	base := strings.TrimRight(os.Getenv("NETBOX_URL"), "/")
	token := os.Getenv("NETBOX_TOKEN_V1")
	if base == "" || token == "" {
		return nil, errors.New("the NetBox floor needs NETBOX_URL and NETBOX_TOKEN_V1: source the env file hack/netbox/up.sh prints")
	}
	auth := "Token " + token
	if strings.HasPrefix(token, "nbt_") {
		auth = "Bearer " + token
	}
	c := &floorClient{base: base, auth: auth, http: &http.Client{Timeout: 2 * time.Minute}}
	nc := netbox.NewConfiguration()
	nc.Servers = netbox.ServerConfigurations{{URL: base}}
	nc.HTTPClient = c.http
	nc.UserAgent = "bench-floor"
	nc.AddDefaultHeader("Authorization", auth)
	c.api = netbox.NewAPIClient(nc)
	return c, nil
}

// measureNetboxFloor times records reservations in the prefix prefixID,
// POSTed to available-ips in lists of batch, and then their deletion in
// lists of batch. Nothing else may use the NetBox meanwhile.
func measureNetboxFloor(ctx context.Context, prefixID int32, namespace string, records, batch int) (f *netboxFloor, err error) {
	c, err := newFloorClient()
	if err != nil {
		return nil, err
	}
	// Not timed: what the provider sets up once, before any claim. Its
	// requests also open the client's connection.
	tag, err := c.ensureTag(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.ensureMarkerField(ctx); err != nil {
		return nil, err
	}

	// Each record as the provider's NetBox backend asks for it at the
	// pool's defaults, for a claim with the provider's marker: a
	// management cluster's identity (a UID, as kube-system's), the
	// namespace and the claim's name.
	identity := string(uuid.NewUUID())
	status, err := netbox.NewIPAddressStatusValueFromValue(floorStatus)
	if err != nil {
		return nil, err
	}
	requests := make([]netbox.IPAddressRequest, records)
	for i := range requests {
		name := fmt.Sprintf("m-%05d", i)
		desc := floorDescription(namespace, name)
		requests[i] = netbox.IPAddressRequest{
			Tags:         []netbox.NestedTagRequest{tag},
			CustomFields: map[string]any{floorMarkerField: identity + "/" + namespace + "/" + name},
			Status:       status,
			Description:  &desc,
		}
	}

	f = &netboxFloor{records: records, batch: batch}
	var ids []int32
	defer func() {
		// A failed run leaves nothing behind, untimed.
		if err != nil && len(ids) > 0 {
			_, _ = c.deleteAll(context.WithoutCancel(ctx), ids, batch)
		}
	}()
	start := time.Now()
	for lo := 0; lo < records; lo += batch {
		chunk := requests[lo:min(lo+batch, records)]
		created, resp, err := c.api.IpamAPI.IpamPrefixesAvailableIpsCreate(ctx, prefixID).IPAddressRequest(chunk).Execute()
		f.createRequests++
		if err != nil {
			return nil, fmt.Errorf("NetBox floor: POST available-ips of prefix %d: %s", prefixID, netboxFailure(resp, err))
		}
		for _, ip := range created {
			ids = append(ids, ip.Id)
		}
		if len(created) != len(chunk) {
			return nil, fmt.Errorf("NetBox floor: POST available-ips of prefix %d: %d records for a list of %d", prefixID, len(created), len(chunk))
		}
	}
	f.create = time.Since(start)

	start = time.Now()
	if f.deleteRequests, err = c.deleteAll(ctx, ids, batch); err != nil {
		return nil, err
	}
	f.delete = time.Since(start)
	ids = nil
	return f, nil
}

// deleteAll deletes ids in lists of batch with NetBox's bulk DELETE, as the
// provider's NetBox backend releases, and returns the requests it sent.
func (c *floorClient) deleteAll(ctx context.Context, ids []int32, batch int) (int, error) {
	return c.deleteAllAt(ctx, "/api/ipam/ip-addresses/", ids, batch)
}

// deleteAllAt is deleteAll of the objects at path.
func (c *floorClient) deleteAllAt(ctx context.Context, path string, ids []int32, batch int) (int, error) {
	sent := 0
	for lo := 0; lo < len(ids); lo += batch {
		var body []map[string]int32
		for _, id := range ids[lo:min(lo+batch, len(ids))] {
			body = append(body, map[string]int32{"id": id})
		}
		sent++
		if err := c.send(ctx, http.MethodDelete, path, nil, body, nil); err != nil {
			return sent, fmt.Errorf("NetBox floor: bulk DELETE of %d objects at %s: %w", len(body), path, err)
		}
	}
	return sent, nil
}

// ensureTag returns the provider's tag, created as the provider creates it
// when it does not exist yet.
func (c *floorClient) ensureTag(ctx context.Context) (netbox.NestedTagRequest, error) {
	var found struct {
		Results []struct {
			Name string `json:"name"`
			Slug string `json:"slug"`
		} `json:"results"`
	}
	if err := c.send(ctx, http.MethodGet, "/api/extras/tags/", url.Values{"slug": {floorTag}}, nil, &found); err != nil {
		return netbox.NestedTagRequest{}, fmt.Errorf("NetBox floor: looking up tag %s: %w", floorTag, err)
	}
	if len(found.Results) > 0 {
		return netbox.NestedTagRequest{Name: found.Results[0].Name, Slug: found.Results[0].Slug}, nil
	}
	body := map[string]any{"name": floorTag, "slug": floorTag, "object_types": []string{"ipam.ipaddress"},
		"description": "IP addresses reserved by Cluster API for an IPAddressClaim"}
	if err := c.send(ctx, http.MethodPost, "/api/extras/tags/", nil, body, nil); err != nil {
		return netbox.NestedTagRequest{}, fmt.Errorf("NetBox floor: creating tag %s: %w", floorTag, err)
	}
	return netbox.NestedTagRequest{Name: floorTag, Slug: floorTag}, nil
}

// ensureMarkerField creates the provider's marker field, as the provider
// does, when it does not exist yet.
func (c *floorClient) ensureMarkerField(ctx context.Context) error {
	var found struct {
		Count int `json:"count"`
	}
	if err := c.send(ctx, http.MethodGet, "/api/extras/custom-fields/", url.Values{"name": {floorMarkerField}}, nil, &found); err != nil {
		return fmt.Errorf("NetBox floor: looking up custom field %s: %w", floorMarkerField, err)
	}
	if found.Count > 0 {
		return nil
	}
	body := map[string]any{"name": floorMarkerField, "type": "text", "object_types": []string{"ipam.ipaddress", "ipam.prefix"},
		"filter_logic": "exact", "label": "Cluster API claim"}
	if err := c.send(ctx, http.MethodPost, "/api/extras/custom-fields/", nil, body, nil); err != nil {
		return fmt.Errorf("NetBox floor: creating custom field %s: %w", floorMarkerField, err)
	}
	return nil
}

// send sends one request with body (when not nil) as JSON, and decodes the
// answer into out (when not nil); any status but 2xx is an error.
func (c *floorClient) send(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(answer))
	}
	if out != nil {
		return json.Unmarshal(answer, out)
	}
	return nil
}

// netboxFailure describes a go-netbox error with NetBox's answer.
func netboxFailure(resp *http.Response, err error) string {
	var apiErr *netbox.GenericOpenAPIError
	if errors.As(err, &apiErr) && len(apiErr.Body()) > 0 {
		return fmt.Sprintf("%v: %s", err, bytes.TrimSpace(apiErr.Body()))
	}
	if resp != nil {
		return fmt.Sprintf("%v (%s)", err, resp.Status)
	}
	return err.Error()
}

// measureRealFloor times the real NetBox alone on the bench's prefix (the
// one the provider's bursts use, seeded as for them), for records claims
// in lists of batch.
func measureRealFloor(ctx context.Context, records, batch int) (*netboxFloor, error) {
	sys, err := newRealNetbox()
	if err != nil {
		return nil, err
	}
	defer sys.close()
	return measureNetboxFloor(ctx, sys.prefixID, fmt.Sprintf("bench-netbox-real-floor-%d", records), records, batch)
}

// measureRealCarveFloor times the real NetBox alone carving children
// children of length from the bench's carving parent, POSTed to
// available-prefixes in lists of batch as the provider's carving pools ask
// (the marker, status and description of each), then their deletion in
// lists of batch.
func measureRealCarveFloor(ctx context.Context, children, length, batch int) (f *netboxFloor, err error) {
	sys, err := newRealNetbox()
	if err != nil {
		return nil, err
	}
	defer sys.close()
	c, err := newFloorClient()
	if err != nil {
		return nil, err
	}
	if err := c.ensureMarkerField(ctx); err != nil {
		return nil, err
	}
	identity := string(uuid.NewUUID())
	namespace := fmt.Sprintf("bench-netbox-real-carve-floor-%d", children)
	requests := make([]map[string]any, children)
	for i := range requests {
		name := fmt.Sprintf("m-%05d", i)
		requests[i] = map[string]any{"prefix_length": length, "status": floorStatus, "description": floorDescription(namespace, name),
			"custom_fields": map[string]any{floorMarkerField: identity + "/" + namespace + "/" + name}}
	}
	f = &netboxFloor{records: children, batch: batch}
	var ids []int32
	deleteAll := func(ctx context.Context) (int, error) { return c.deleteAllAt(ctx, "/api/ipam/prefixes/", ids, batch) }
	defer func() {
		if err != nil && len(ids) > 0 {
			_, _ = deleteAll(context.WithoutCancel(ctx))
		}
	}()
	start := time.Now()
	for lo := 0; lo < children; lo += batch {
		chunk := requests[lo:min(lo+batch, children)]
		var created []struct {
			ID int32 `json:"id"`
		}
		f.createRequests++
		if err := c.send(ctx, http.MethodPost, fmt.Sprintf("/api/ipam/prefixes/%d/available-prefixes/", sys.carveID), nil, chunk, &created); err != nil {
			return nil, fmt.Errorf("NetBox floor: POST available-prefixes of prefix %d: %w", sys.carveID, err)
		}
		for _, p := range created {
			ids = append(ids, p.ID)
		}
		if len(created) != len(chunk) {
			return nil, fmt.Errorf("NetBox floor: POST available-prefixes of prefix %d: %d children for a list of %d", sys.carveID, len(created), len(chunk))
		}
	}
	f.create = time.Since(start)
	start = time.Now()
	if f.deleteRequests, err = deleteAll(ctx); err != nil {
		return nil, err
	}
	f.delete = time.Since(start)
	ids = nil
	return f, nil
}
