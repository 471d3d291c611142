package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// Some claims of a run do not take the next free address: a share requests
// one (by annotation), and a share takes a record the IPAM team planned for
// it before the run (every pool adopts planned records). Their addresses
// come from the top of their pool's network, which the next free addresses,
// filling it from the bottom, never reach. Once bound, each must hold its
// address (and a planned claim its planned record); once released, every
// planned record must be back as planned: there, without a marker.

// planKind is how a claim gets its address.
type planKind int

const (
	nextFree planKind = iota
	requested
	planned
)

// claimPlan is what a claim of the run was given to expect.
type claimPlan struct {
	kind planKind
	addr netip.Addr
	// ref is the planned record's ID.
	ref string
}

// plannedNamePattern renders the planned record's name for a claim: its
// Machine's (the claim's own name in a run) in its namespace's domain.
const plannedNamePattern = "{{ .MachineName }}.{{ .Namespace }}.chaos.example"

// planClaims gives each claim its kind, by the run's seed, and seeds a
// planned record for each planned claim.
func (r *run) planClaims() error {
	r.plans = map[types.NamespacedName]claimPlan{}
	r.reserved = map[netip.Addr]bool{}
	rng := rand.New(rand.NewPCG(r.s.seed, 3))
	top := map[string]netip.Addr{}
	for i, key := range r.claimKeys {
		x := rng.Float64()
		var kind planKind
		switch {
		case x < r.s.requestedShare:
			kind = requested
		case x < r.s.requestedShare+r.s.plannedShare:
			kind = planned
		default:
			continue
		}
		network := r.prefixes[i%len(r.prefixes)]
		a, ok := top[key.Namespace]
		if !ok {
			a = netipx.PrefixLastIP(network)
		}
		if a = a.Prev(); r.gateways[a] {
			a = a.Prev()
		}
		top[key.Namespace] = a
		plan := claimPlan{kind: kind, addr: a}
		if kind == planned {
			name := fmt.Sprintf("%s.%s.chaos.example", key.Name, key.Namespace)
			ref, err := r.sys.plan(netip.PrefixFrom(a, network.Bits()), name)
			if err != nil {
				return fmt.Errorf("planning %s for %s: %w", a, key, err)
			}
			plan.ref = ref
		}
		r.plans[key] = plan
		r.reserved[a] = true
	}
	r.logf("%d claims request an address and %d adopt a planned record", r.countPlans(requested), r.countPlans(planned))
	return nil
}

func (r *run) countPlans(kind planKind) int {
	n := 0
	for _, p := range r.plans {
		if p.kind == kind {
			n++
		}
	}
	return n
}

// annotate adds the claim's request to it.
func (r *run) annotate(claim *ipamv1.IPAddressClaim) {
	if p := r.plans[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}]; p.kind == requested {
		claim.Annotations = map[string]string{v1alpha1.RequestedAddressAnnotation: p.addr.String()}
	}
}

// isPlannedSeed says whether rec is a planned record the run seeded that
// carries no marker: the IPAM team's, not a leak.
func (r *run) isPlannedSeed(rec record) bool {
	if rec.Marker != "" {
		return false
	}
	for _, p := range r.plans {
		if p.kind == planned && p.ref == rec.ID {
			return true
		}
	}
	return false
}

// checkPlansBound checks that each bound claim that requested an address
// holds it, and that each planned claim holds its planned record.
func (r *run) checkPlansBound(st *state, byClaim map[types.NamespacedName][]record) {
	for key, p := range r.plans {
		address, bound := st.addresses[key]
		if !bound {
			continue // counted as stuck
		}
		if address.Spec.Address != p.addr.String() {
			r.res.violate(&r.res.mismatches, "claim %s %s %s but is bound to %s", key, p.verb(), p.addr, address.Spec.Address)
			continue
		}
		if p.kind == planned && (len(byClaim[key]) != 1 || byClaim[key][0].ID != p.ref || !byClaim[key][0].Planned) {
			r.res.violate(&r.res.mismatches, "claim %s is bound to its planned address %s, but its records are %v, not the planned %s",
				key, p.addr, byClaim[key], p.ref)
		}
	}
}

// checkPlansReleased checks that every planned record is back as planned:
// at its address, without a marker.
func (r *run) checkPlansReleased(recs []record) {
	byID := map[string]record{}
	for _, rec := range recs {
		byID[rec.ID] = rec
	}
	for key, p := range r.plans {
		if p.kind != planned {
			continue
		}
		switch rec, ok := byID[p.ref]; {
		case !ok:
			r.res.violate(&r.res.leaks, "the record %s planned for claim %s at %s is gone after the release", p.ref, key, p.addr)
		case rec.Marker != "" || rec.Address.Addr() != p.addr:
			r.res.violate(&r.res.leaks, "the record %s planned for claim %s at %s is %s with marker %q after the release",
				p.ref, key, p.addr, rec.Address, rec.Marker)
		}
	}
}

func (p claimPlan) verb() string {
	if p.kind == planned {
		return "was planned at"
	}
	return "requested"
}
