package poolkinds

import (
	"fmt"
	"net/netip"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// netboxChildPool makes a NetboxIPPool whose only source is child, carved
// by parent: the prefix by its CIDR in the VRF of the parent's source that
// holds it, reached as the parent reaches NetBox, its IP addresses
// recorded with the parent's tenant, tags, custom fields and description
// pattern. The parent's status is not the nodes': it is a prefix's.
func netboxChildPool(parent poolkind.Pool, child netip.Prefix, gateway v1alpha1.Gateway) (poolkind.Pool, error) {
	if err := netboxCanParent(parent); err != nil {
		return nil, err
	}
	spec := parent.(netboxPool).GetNetboxSpec()
	vrf, found := "", false
	for _, s := range spec.Sources {
		if p, err := netip.ParsePrefix(s.Prefix.CIDR); err == nil && p.Contains(child.Addr()) && p.Bits() < child.Bits() {
			vrf, found = s.Prefix.VRF, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("no prefix source of %s holds %s", parent.GetName(), child)
	}
	return &v1alpha1.NetboxIPPool{Spec: v1alpha1.NetboxIPPoolSpec{
		Connection: spec.Connection,
		Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: child.String(), VRF: vrf}}},
		Gateway:    gateway,
		Reservation: v1alpha1.NetboxReservation{
			Tenant:             spec.Reservation.Tenant,
			DescriptionPattern: spec.Reservation.DescriptionPattern,
			Tags:               spec.Reservation.Tags,
			CustomFields:       spec.Reservation.CustomFields,
		},
		Orphans: spec.Orphans,
		Release: spec.Release,
	}}, nil
}

// netboxCanParent: a parent carves, from prefixes named by CIDR, whose VRF
// the nodes pool then names the child in.
func netboxCanParent(parent poolkind.Pool) error {
	spec := parent.(netboxPool).GetNetboxSpec()
	if spec.ChildPrefixes == nil {
		return fmt.Errorf("%s has no childPrefixes: it hands out addresses, not subnets", parent.GetName())
	}
	for _, s := range spec.Sources {
		if s.Prefix == nil || s.Prefix.CIDR == "" {
			return fmt.Errorf("%s names a prefix by id: name the parent's prefixes by cidr (and vrf), so that the nodes pool can name the child in the same VRF",
				parent.GetName())
		}
	}
	return nil
}

// infobloxChildPool makes an InfobloxIPPool whose only source is child, a
// network carved by parent from one of its network containers, in the
// parent's network view: reached as the parent reaches the grid, its
// objects made as the parent makes its children (fixed addresses with its
// comment pattern and extensible attributes).
func infobloxChildPool(parent poolkind.Pool, child netip.Prefix, gateway v1alpha1.Gateway) (poolkind.Pool, error) {
	if err := infobloxCanParent(parent); err != nil {
		return nil, err
	}
	spec := parent.(infobloxPool).GetInfobloxSpec()
	return &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{
		Connection:  spec.Connection,
		NetworkView: spec.NetworkView,
		Sources:     []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: child.String()}}},
		Gateway:     gateway,
		Reservation: spec.Reservation,
		Orphans:     spec.Orphans,
		Release:     spec.Release,
	}}, nil
}

// infobloxCanParent: a parent carves from network containers.
func infobloxCanParent(parent poolkind.Pool) error {
	if parent.(infobloxPool).GetInfobloxSpec().ChildPrefixes == nil {
		return fmt.Errorf("%s has no childPrefixes: it hands out addresses, not subnets", parent.GetName())
	}
	return nil
}
