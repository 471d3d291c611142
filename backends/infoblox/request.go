package infoblox

import (
	"context"
	"encoding/json"
	"fmt"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// WAPI's request object (POST /wapi/vX/request) runs a list of operations
// in order in one transaction: all apply, or none does and the grid answers
// with the failing operation's error. A burst of claims thus costs one
// request for their marker searches and one for their objects (or their
// deletions) instead of two per claim.

// sendRequest sends operations as one request object, built by the
// client's request builder, and returns one answer per operation whose
// answer is not discarded.
func (d *driver) sendRequest(ctx context.Context, ops []*ibclient.RequestBody) ([]json.RawMessage, error) {
	req, err := d.builder.BuildRequest(ibclient.CREATE, ibclient.NewMultiRequest(ops), "", nil)
	if err != nil {
		return nil, fmt.Errorf("building a WAPI request object: %w", err)
	}
	body, err := (&requestor{ctx: ctx, client: d.http}).SendRequest(req)
	if err != nil {
		return nil, err
	}
	answered := 0
	for _, op := range ops {
		if !op.Discard {
			answered++
		}
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(body, &answers); err != nil || len(answers) != answered {
		return nil, fmt.Errorf("%w: %s: the grid answered %d results to %d operations (%v)",
			backends.ErrUnavailable, describe(req), len(answers), answered, err)
	}
	return answers, nil
}
