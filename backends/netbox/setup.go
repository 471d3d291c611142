package netbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

type customFieldObject struct {
	ID          int32    `json:"id"`
	Name        string   `json:"name"`
	ObjectTypes []string `json:"object_types"`
	Type        struct {
		Value string `json:"value"`
	} `json:"type"`
	FilterLogic struct {
		Value string `json:"value"`
	} `json:"filter_logic"`
}

// setupConfirmed remembers the tags NetBox confirmed for a setup (see
// backends.SetupMemory).
var setupConfirmed = backends.NewSetupMemory[[]netbox.NestedTagRequest]()

// setupKey names what ensureSetup confirms for d.
func (d *driver) setupKey() string {
	tags := slices.Clone(d.cfg.Reservation.Tags)
	slices.Sort(tags)
	fields := slices.Sorted(maps.Keys(d.cfg.Reservation.CustomFields))
	planned := ""
	if d.cfg.Planned != nil {
		planned = d.cfg.Planned.Tag
	}
	return backends.SetupKey(d.cfg.URL, d.cfg.Token, d.cfg.Tag, d.cfg.MarkerField, d.markedType, planned,
		strings.Join(tags, ","), strings.Join(fields, ","))
}

// ensureSetup makes sure NetBox holds what reservations refer to: the
// provider's tag and marker field (created when the token may), the pool's
// extra tags and custom fields, and its tenant. Its first request also proves
// the token works.
func (d *driver) ensureSetup(ctx context.Context) (*references, error) {
	refs := &references{}
	key := d.setupKey()
	tags, err := setupConfirmed.Confirm(ctx, key, func(ctx context.Context) ([]netbox.NestedTagRequest, error) {
		tags, err := d.ensureTags(ctx)
		if err != nil {
			return nil, err
		}
		return tags, d.ensureCustomFields(ctx)
	})
	if err != nil {
		return nil, err
	}
	refs.tags = slices.Clone(tags)
	if slug := d.cfg.Reservation.TenantSlug; slug != "" {
		var p page[brief]
		if err := d.getJSON(ctx, "/api/tenancy/tenants/", url.Values{"slug": {slug}}, &p); err != nil {
			return nil, fmt.Errorf("looking up tenant %q: %w", slug, err)
		}
		tenant, err := exactlyOne(p.Results, fmt.Sprintf("tenant %q", slug))
		if err != nil {
			return nil, err
		}
		refs.tenantID = tenant.ID
	}
	return refs, nil
}

func (d *driver) ensureTags(ctx context.Context) ([]netbox.NestedTagRequest, error) {
	wanted := append([]string{d.cfg.Tag}, d.cfg.Reservation.Tags...)
	lookup := slices.Clone(wanted)
	if d.cfg.Planned != nil && d.cfg.Planned.Tag != "" {
		lookup = append(lookup, d.cfg.Planned.Tag)
	}
	var p page[brief]
	if err := d.getJSON(ctx, "/api/extras/tags/", url.Values{"slug": lookup, "limit": {"1000"}}, &p); err != nil {
		return nil, fmt.Errorf("looking up tags: %w", err)
	}
	found := map[string]brief{}
	for _, t := range p.Results {
		found[t.Slug] = t
	}
	if _, ok := found[d.cfg.Tag]; !ok {
		t, err := d.createTag(ctx)
		if errors.Is(err, backends.ErrInvalidConfig) {
			// Another replica or pool may have created it meanwhile.
			var again page[brief]
			if d.getJSON(ctx, "/api/extras/tags/", url.Values{"slug": {d.cfg.Tag}}, &again) == nil && len(again.Results) == 1 {
				t, err = again.Results[0], nil
			}
		}
		if err != nil {
			return nil, err
		}
		found[t.Slug] = t
	}
	if d.cfg.Planned != nil && d.cfg.Planned.Tag != "" {
		if _, ok := found[d.cfg.Planned.Tag]; !ok {
			return nil, fmt.Errorf("%w: tag %q, which marks the records the IPAM team plans, does not exist in NetBox", backends.ErrNotFound, d.cfg.Planned.Tag)
		}
	}
	tags := make([]netbox.NestedTagRequest, 0, len(wanted))
	for _, slug := range wanted {
		t, ok := found[slug]
		if !ok {
			return nil, fmt.Errorf("%w: tag %q does not exist in NetBox", backends.ErrNotFound, slug)
		}
		tags = append(tags, netbox.NestedTagRequest{Name: t.Name, Slug: t.Slug})
	}
	return tags, nil
}

func (d *driver) createTag(ctx context.Context) (brief, error) {
	req := netbox.NewTagRequest(d.cfg.Tag, d.cfg.Tag)
	req.SetDescription("IP addresses reserved by Cluster API for an IPAddressClaim")
	req.SetObjectTypes([]string{"ipam.ipaddress"})
	_, resp, err := d.api.ExtrasAPI.ExtrasTagsCreate(ctx).TagRequest(*req).Execute()
	if err = createError(resp, err); err != nil {
		err = classify("creating tag "+d.cfg.Tag, resp, err)
		if errors.Is(err, backends.ErrForbidden) {
			return brief{}, fmt.Errorf("%w: tag %q does not exist and the token may not create it; create it in NetBox (Customization > Tags) or grant extras.add_tag: %v",
				backends.ErrSetupRequired, d.cfg.Tag, err)
		}
		return brief{}, err
	}
	return brief{Name: d.cfg.Tag, Slug: d.cfg.Tag}, nil
}

func (d *driver) ensureCustomFields(ctx context.Context) error {
	names := []string{d.cfg.MarkerField}
	for name := range d.cfg.Reservation.CustomFields {
		names = append(names, name)
	}
	slices.Sort(names[1:])
	var p page[customFieldObject]
	if err := d.getJSON(ctx, "/api/extras/custom-fields/", url.Values{"name": names, "limit": {"1000"}}, &p); err != nil {
		return fmt.Errorf("looking up custom fields: %w", err)
	}
	found := map[string]customFieldObject{}
	for _, cf := range p.Results {
		found[cf.Name] = cf
	}
	for _, name := range names {
		cf, ok := found[name]
		if !ok && name == d.cfg.MarkerField {
			err := d.createMarkerField(ctx)
			if err == nil {
				// An earlier field of this name may have been loose.
				d.rememberFilterLogic(filterLogicExact)
				continue
			}
			// Another replica or pool, or someone by hand, may have created
			// it meanwhile: it is checked as one found at first.
			var again page[customFieldObject]
			if !errors.Is(err, backends.ErrInvalidConfig) ||
				d.getJSON(ctx, "/api/extras/custom-fields/", url.Values{"name": {name}}, &again) != nil || len(again.Results) != 1 {
				return err
			}
			cf, ok = again.Results[0], true
		}
		switch {
		case !ok:
			return fmt.Errorf("%w: custom field %q does not exist in NetBox", backends.ErrNotFound, name)
		case !slices.Contains(cf.ObjectTypes, d.markedType):
			return fmt.Errorf("%w: custom field %q does not apply to %s; add %s to its object types", backends.ErrSetupRequired, name, markedTypeNames[d.markedType], d.markedType)
		}
		if name != d.cfg.MarkerField {
			continue
		}
		if cf.Type.Value != "text" {
			return fmt.Errorf("%w: marker field %q must be of type text, not %q", backends.ErrSetupRequired, name, cf.Type.Value)
		}
		if cf.FilterLogic.Value == "disabled" {
			// NetBox would ignore the cf_ filter and return every address.
			return fmt.Errorf("%w: marker field %q has filtering disabled; set its filter logic to exact", backends.ErrSetupRequired, name)
		}
		d.rememberFilterLogic(cf.FilterLogic.Value)
	}
	return nil
}

// markedTypeNames name the object types a pool marks, for errors.
var markedTypeNames = map[string]string{ipAddressType: "IP addresses", prefixType: "prefixes"}

func (d *driver) createMarkerField(ctx context.Context) error {
	// Both types, whichever pool comes first: an address pool and a
	// carving pool share the field.
	req := netbox.NewWritableCustomFieldRequest([]string{ipAddressType, prefixType}, d.cfg.MarkerField)
	req.SetType(netbox.PATCHEDWRITABLECUSTOMFIELDREQUESTTYPE_TEXT)
	req.SetFilterLogic(netbox.PATCHEDWRITABLECUSTOMFIELDREQUESTFILTERLOGIC_EXACT)
	req.SetLabel("Cluster API claim")
	req.SetDescription("The IPAddressClaim holding this address or prefix, as [<identity>/]<namespace>/<name>. Set by the Cluster API IPAM provider; remove it to keep the object when the claim is deleted.")
	_, resp, err := d.api.ExtrasAPI.ExtrasCustomFieldsCreate(ctx).WritableCustomFieldRequest(*req).Execute()
	if err = createError(resp, err); err != nil {
		err = classify("creating custom field "+d.cfg.MarkerField, resp, err)
		if errors.Is(err, backends.ErrForbidden) {
			return fmt.Errorf("%w: custom field %q does not exist and the token may not create it; create it in NetBox (type text, object types IP address and prefix, filter logic exact) or grant extras.add_customfield: %v",
				backends.ErrSetupRequired, d.cfg.MarkerField, err)
		}
		return err
	}
	return nil
}

// createError ignores an error that only says the 201 answer of a create did
// not decode: the object exists, and its fields are not needed.
func createError(resp *http.Response, err error) error {
	if err != nil && resp != nil && resp.StatusCode == http.StatusCreated {
		return nil
	}
	return err
}
