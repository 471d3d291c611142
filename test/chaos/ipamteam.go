package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// The IPAM team's phase: while the allocation burst runs, the IPAM team
// edits bound claims' records in the IPAM system, as people do, and rotates
// the API credentials. The provider must never bind one address to two
// claims, and must report every edit on its claim by the next audit.

// edit is what the IPAM team did to one bound claim's record.
type edit string

const (
	// editReaddress: the record now holds another free address of its
	// network; the marker is kept.
	editReaddress edit = "readdressed"
	// editRescope: the record, same address and marker, now lies in another
	// VRF (NetBox) or network view (Infoblox).
	editRescope edit = "rescoped"
	// editDelete: the record is gone.
	editDelete edit = "deleted"
	// editDeleteChild: a carved child is gone. The provider never carves
	// that very block again (only the system's atomic request carves), so
	// it reports the child and holds nothing, unless the guard hands the
	// block back from a claim the system carved it for meanwhile.
	editDeleteChild edit = "child deleted"
	// editDisownChild: a carved child lost its marker: it is the IPAM
	// team's now, kept when its claim goes, and holds the block.
	editDisownChild edit = "child disowned"
)

// report is a claim's AddressReserved condition that reports an edit.
type report struct {
	status metav1.ConditionStatus
	reason string
}

// reportsOf are the conditions that report an edit. A record handed back
// by the guard (the IPAM system answered the freed address to another
// claim first) is reported as AddressHeldInCluster, whatever the edit.
var reportsOf = map[edit][]report{
	editReaddress:   {{metav1.ConditionTrue, v1alpha1.RecordMovedReason}, {metav1.ConditionTrue, reasons.AddressHeldInClusterReason}},
	editRescope:     {{metav1.ConditionTrue, v1alpha1.RecordMovedReason}, {metav1.ConditionTrue, reasons.AddressHeldInClusterReason}},
	editDelete:      {{metav1.ConditionTrue, v1alpha1.RecordDeletedReason}, {metav1.ConditionTrue, reasons.AddressHeldInClusterReason}},
	editDeleteChild: {{metav1.ConditionFalse, v1alpha1.RecordDeletedReason}, {metav1.ConditionTrue, reasons.AddressHeldInClusterReason}},
	editDisownChild: {{metav1.ConditionFalse, v1alpha1.AddressTakenOverReason}},
}

// ipamTeam is the phase's state within one run.
type ipamTeam struct {
	edited map[types.NamespacedName]edit
	// disowned are the IDs of the children whose marker the team cleared:
	// the team's records now, never leaks.
	disowned map[string]bool
	rotated  bool
	editedAt int
	// samples counts the observations checked for an address held twice.
	samples int
}

// editsPerKind is how many bound claims each kind of edit touches.
func (r *run) editsPerKind() int { return max(2, len(r.claimKeys)/100) }

// ipamTeamActs edits bound records once half the claims are bound, and
// rotates the credentials once 70 % are; it is called with every
// observation of the allocation burst.
func (r *run) ipamTeamActs(ctx context.Context, st *state, done int, rng *rand.Rand) {
	total := len(r.claimKeys)
	if r.team.edited == nil && done >= total/2 {
		r.team.edited = map[types.NamespacedName]edit{}
		r.team.disowned = map[string]bool{}
		r.team.editedAt = done
		if err := r.editRecords(st, rng); err != nil {
			r.res.err = fmt.Errorf("the IPAM team's edits: %w", err)
		}
	}
	if !r.team.rotated && done >= total*7/10 {
		r.team.rotated = true
		if err := r.rotateCredentials(ctx); err != nil {
			r.res.err = fmt.Errorf("rotating the credentials: %w", err)
		}
	}
}

// editRecords picks bound claims whose IPAddresses the run left alone and
// readdresses, rescopes and deletes one record each.
func (r *run) editRecords(st *state, rng *rand.Rand) error {
	recs, err := r.ownRecords()
	if err != nil {
		return err
	}
	byClaim := map[types.NamespacedName][]record{}
	for _, rec := range recs {
		if key, ok := claimOfMarker(rec.Marker); ok {
			byClaim[key] = append(byClaim[key], rec)
		}
	}
	held := map[netip.Addr]bool{}
	for _, rec := range recs {
		held[rec.Address.Addr()] = true
	}
	for a := range r.reserved {
		// Requested, perhaps not reserved yet.
		held[a] = true
	}
	var candidates []types.NamespacedName
	for _, key := range r.claimKeys {
		_, deleted := r.deleted[key]
		// A planned record is the IPAM team's plan: they leave it be.
		if !deleted && r.plans[key].kind != planned && r.ready(st, key) && len(byClaim[key]) == 1 &&
			byClaim[key][0].Address.Addr().String() == st.addresses[key].Spec.Address {
			candidates = append(candidates, key)
		}
	}
	rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	n := r.editsPerKind()
	var counts = map[edit]int{}
	for _, key := range candidates {
		rec := byClaim[key][0]
		var kind edit
		switch {
		case r.s.carve > 0 && counts[editDeleteChild] < n:
			kind = editDeleteChild
			if err := r.sys.deleteChild(rec); err != nil {
				return fmt.Errorf("deleting child %s of %s: %w", rec.ID, key, err)
			}
		case r.s.carve > 0 && counts[editDisownChild] < n:
			kind = editDisownChild
			if err := r.sys.disownChild(rec); err != nil {
				return fmt.Errorf("clearing the marker of child %s of %s: %w", rec.ID, key, err)
			}
			r.team.disowned[rec.ID] = true
		case r.s.carve > 0:
			continue
		case counts[editReaddress] < n:
			kind = editReaddress
			to, ok := r.freeAddress(rec.Address, held)
			if !ok {
				continue
			}
			held[to] = true
			if err := r.sys.readdress(rec, to); err != nil {
				return fmt.Errorf("readdressing %s of %s: %w", rec.ID, key, err)
			}
		case counts[editRescope] < n:
			kind = editRescope
			if err := r.sys.rescope(rec); err != nil {
				return fmt.Errorf("moving %s of %s to another scope: %w", rec.ID, key, err)
			}
		case counts[editDelete] < n:
			kind = editDelete
			if err := r.sys.deleteRecord(rec); err != nil {
				return fmt.Errorf("deleting %s of %s: %w", rec.ID, key, err)
			}
		default:
			continue
		}
		counts[kind]++
		r.team.edited[key] = kind
	}
	if r.s.carve > 0 {
		r.mgr.Note("IPAM team: deleted %d and cleared the marker of %d bound children", counts[editDeleteChild], counts[editDisownChild])
		r.logf("IPAM team: deleted %d and cleared the marker of %d bound children", counts[editDeleteChild], counts[editDisownChild])
		return nil
	}
	r.mgr.Note("IPAM team: readdressed %d, rescoped %d and deleted %d bound records",
		counts[editReaddress], counts[editRescope], counts[editDelete])
	r.logf("IPAM team: readdressed %d, rescoped %d and deleted %d bound records", counts[editReaddress], counts[editRescope], counts[editDelete])
	return nil
}

// freeAddress is the highest address of rec's network that no record holds
// (allocation fills networks from the bottom).
func (r *run) freeAddress(rec netip.Prefix, held map[netip.Addr]bool) (netip.Addr, bool) {
	network := rec.Masked()
	for a := netipx.PrefixLastIP(network).Prev(); network.Contains(a) && a != network.Addr(); a = a.Prev() {
		if !held[a] && !r.gateways[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// rotateCredentials revokes the credentials every pool's Secret holds, then,
// two seconds later, writes new ones into every Secret: the pools' claims
// meet refusals meanwhile and must bind again once the Secrets change.
func (r *run) rotateCredentials(ctx context.Context) error {
	data := r.sys.rotateCredentials(r.px.caPEM())
	r.mgr.Note("IPAM team: credentials rotated; the Secrets follow in 2s")
	r.logf("IPAM team: credentials rotated; updating the Secrets in 2s")
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Second):
	}
	for _, ns := range r.namespaces {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			secret := &corev1.Secret{}
			if err := r.h.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ipam-credentials"}, secret); err != nil {
				return err
			}
			secret.Data = data
			return r.h.k8s.Update(ctx, secret)
		})
		if err != nil {
			return fmt.Errorf("updating the Secret of %s: %w", ns, err)
		}
	}
	r.mgr.Note("IPAM team: Secrets updated")
	return nil
}

// sampleHeldOnce checks one observation: no address is held by two live
// IPAddresses at once. The run's pools have disjoint networks in one
// scope, so the address alone identifies it.
func (r *run) sampleHeldOnce(st *state) {
	r.team.samples++
	holders := map[string][]string{}
	for key, a := range st.addresses {
		if a.DeletionTimestamp.IsZero() {
			holders[a.Spec.Address] = append(holders[a.Spec.Address], key.String())
		}
	}
	for addr, keys := range holders {
		if len(keys) > 1 {
			sort.Strings(keys)
			r.res.violate(&r.res.duplicates, "sampled: address %s held at once by %s", addr, strings.Join(keys, ", "))
		}
	}
}

// checkEditsReported checks, after one audit, that every edited claim says
// what happened to its record on its AddressReserved condition.
func (r *run) checkEditsReported(ctx context.Context) error {
	st, err := r.observe(ctx)
	if err != nil {
		return err
	}
	keys := make([]types.NamespacedName, 0, len(r.team.edited))
	for key := range r.team.edited {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, key := range keys {
		kind := r.team.edited[key]
		claim, ok := st.claims[key]
		if !ok {
			continue // counted as stuck
		}
		cond := conditions.Get(claim, v1alpha1.AddressReservedCondition)
		if cond == nil || !slices.Contains(reportsOf[kind], report{cond.Status, cond.Reason}) {
			got := "no AddressReserved condition"
			if cond != nil {
				got = fmt.Sprintf("AddressReserved=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
			r.res.violate(&r.res.unreported, "claim %s: its record was %s, but after an audit it says %s", key, kind, got)
		}
	}
	r.logf("IPAM team: %d edits checked for a report on their claims; %d observations checked for an address held twice",
		len(keys), r.team.samples)
	return nil
}

// expectedRecords is how many records a bound claim may hold after the
// audit: one at its address, and the moved record the IPAM team made.
func (r *run) expectedRecords(key types.NamespacedName) int {
	switch r.team.edited[key] {
	case editReaddress, editRescope:
		return 2
	case editDisownChild:
		// Its child is the IPAM team's now.
		return 0
	}
	return 1
}

// mayHoldNone says whether a bound claim may hold no record: the IPAM team
// deleted its child or cleared its marker, which the provider reports and
// never repairs by carving.
func (r *run) mayHoldNone(key types.NamespacedName) bool {
	switch r.team.edited[key] {
	case editDeleteChild, editDisownChild:
		return true
	}
	return false
}
