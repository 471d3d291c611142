package netboxsim

import (
	"net/http"
	"slices"
)

const (
	pythonVersion = "3.13.5"
	djangoVersion = "6.1.2"
)

func apiRoot(c *reqCtx) response {
	b := c.rend.base + "/api/"
	return response{http.StatusOK, map[string]string{
		"circuits": b + "circuits/", "core": b + "core/", "dcim": b + "dcim/", "extras": b + "extras/",
		"ipam": b + "ipam/", "plugins": b + "plugins/", "status": b + "status/", "tenancy": b + "tenancy/",
		"users": b + "users/", "virtualization": b + "virtualization/", "vpn": b + "vpn/", "wireless": b + "wireless/",
	}}
}

func getStatus(c *reqCtx) response {
	return response{http.StatusOK, map[string]any{
		"django-version": djangoVersion,
		"hostname":       "netboxsim",
		"installed_apps": map[string]string{
			"django_filters": "25.1", "django_prometheus": "2.3.1", "django_rq": "3.0.1",
			"django_tables2": "2.7.5", "drf_spectacular": "0.28.0", "mptt": "0.17.0",
			"rest_framework": "3.16.0", "social_django": "5.4.3", "taggit": "6.1.0", "timezone_field": "7.1",
		},
		"netbox-version":      netboxVersion,
		"netbox-full-version": netboxVersion,
		"plugins":             map[string]string{},
		"python-version":      pythonVersion,
		"rq-workers-running":  1,
	}}
}

func listVRFs(c *reqCtx) response {
	f := newFilterSet(c.r)
	var preds []func(*vrfObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(v *vrfObj) bool { return containsID(ids, v.id) })
	}
	if names := f.values("name"); names != nil {
		preds = append(preds, func(v *vrfObj) bool { return slices.Contains(names, v.name) })
	}
	if rds := f.values("rd"); rds != nil {
		preds = append(preds, func(v *vrfObj) bool { return slices.Contains(rds, v.rd) })
	}
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, filter(c.st().vrfList(), preds), func(v *vrfObj) any { return c.rend.vrf(v) })
}

func getVRF(c *reqCtx) response {
	return getOne(c, c.st().vrfs, "VRF", func(v *vrfObj) any { return c.rend.vrf(v) })
}

func listTenants(c *reqCtx) response {
	f := newFilterSet(c.r)
	var preds []func(*tenantObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(t *tenantObj) bool { return containsID(ids, t.id) })
	}
	if names := f.values("name"); names != nil {
		preds = append(preds, func(t *tenantObj) bool { return slices.Contains(names, t.name) })
	}
	if slugs := f.values("slug"); slugs != nil {
		preds = append(preds, func(t *tenantObj) bool { return slices.Contains(slugs, t.slug) })
	}
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, filter(c.st().tenantList(), preds), func(t *tenantObj) any { return c.rend.tenant(t) })
}

func getTenant(c *reqCtx) response {
	return getOne(c, c.st().tenants, "Tenant", func(t *tenantObj) any { return c.rend.tenant(t) })
}
