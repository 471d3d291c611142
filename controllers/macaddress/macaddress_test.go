package macaddress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

func TestMACAddressesLookup(t *testing.T) {
	metal3Data := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Data", "workers-0")
	dataClaim := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3DataClaim", "m3m-a")
	m3m := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Machine", "m3m-a")
	vm := apitest.OwnerRef(apitest.InfraV1beta1, "VSphereVM", "vm-a")
	hostAnnotation := map[string]string{BareMetalHostAnnotation: "hosts/host-0"}
	bmh := func(mac string) map[string]any { return map[string]any{"spec": map[string]any{"bootMACAddress": mac}} }
	vmNetwork := func(specMACs, statusMACs []string) map[string]any {
		devices, status := []any{}, []any{}
		for _, m := range specMACs {
			devices = append(devices, map[string]any{"networkName": "vm-network", "macAddr": m})
		}
		for _, m := range statusMACs {
			status = append(status, map[string]any{"connected": true, "macAddr": m})
		}
		return map[string]any{"spec": map[string]any{"network": map[string]any{"devices": devices}},
			"status": map[string]any{"network": status}}
	}
	hostSource := Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	vmSource := Source{Kind: VSphereVMKind, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-a"}}

	tests := []struct {
		name        string
		claimName   string
		claimOwners []metav1.OwnerReference
		seed        func(r *apitest.ObjectReader)
		errs        map[string]error
		want        Found
		wantGets    []string
		wantErr     bool
	}{
		{
			name:        "Metal3: Metal3Data, Metal3Machine, the BareMetalHost's bootMACAddress",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{dataClaim, m3m}, nil, nil)
				r.Add("Metal3DataClaim", "ns", "m3m-a", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.Add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52-54-00-AA-BB-01"))
			},
			want:     Found{MAC: "52:54:00:aa:bb:01", Source: hostSource},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: through the Metal3DataClaim when the Metal3Data names no Metal3Machine",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{dataClaim}, nil, nil)
				r.Add("Metal3DataClaim", "ns", "m3m-a", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.Add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52:54:00:aa:bb:01"))
			},
			want:     Found{MAC: "52:54:00:aa:bb:01", Source: hostSource},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3DataClaim/ns/m3m-a", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the host has no bootMACAddress yet",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.Add("BareMetalHost", "hosts", "host-0", nil, nil, map[string]any{"spec": map[string]any{}})
			},
			want:     Found{Source: hostSource, Unknown: "BareMetalHost hosts/host-0 has no spec.bootMACAddress yet"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the host is gone",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
			},
			want:     Found{Source: hostSource, Unknown: "BareMetalHost hosts/host-0 not found"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the Metal3Machine names no host",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, nil, nil)
			},
			want:     Found{Unknown: "Metal3Machine ns/m3m-a names no BareMetalHost in its annotation metal3.io/BareMetalHost"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a"},
		},
		{
			name:        "Metal3: a malformed bootMACAddress",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.Add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52:54:00"))
			},
			want: Found{Source: hostSource,
				Unknown: `BareMetalHost hosts/host-0 spec.bootMACAddress: "52:54:00" is not a 48-bit MAC address`},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "CAPV: the MAC vSphere gave the device, as the VSphereVM's status reports it (checked once bound)",
			claimName:   "vm-a-1-0",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *apitest.ObjectReader) {
				r.Add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{"", ""}, []string{"00:50:56:00:00:01", "00:50:56:00:00:02"}))
			},
			want:     Found{MAC: "00:50:56:00:00:02", Source: vmSource},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name:        "CAPV: a MAC set in the device's spec is known before the VM is cloned",
			claimName:   "vm-a-0-2",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *apitest.ObjectReader) {
				r.Add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{"00:50:56:AB:CD:EF"}, nil))
			},
			want:     Found{MAC: "00:50:56:ab:cd:ef", Source: vmSource},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name:        "CAPV: no MAC in the device's spec, none reported: deferred, never waited for",
			claimName:   "vm-a-0-0",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *apitest.ObjectReader) {
				r.Add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{""}, nil))
			},
			want: Found{Source: vmSource, Deferred: "VSphereVM ns/vm-a sets no spec.network.devices[0].macAddr, and CAPV reports " +
				"the MAC vSphere gives the device (status.network[0].macAddr) only once the VM is ready, which needs this address"},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name:        "CAPV: a claim not named <vm>-<device>-<pool> has no device",
			claimName:   "vip",
			claimOwners: []metav1.OwnerReference{vm},
		},
		{
			name:        "CAPV: a namesake of the VSphereVM is not read from",
			claimName:   "vm-a-0-0",
			claimOwners: []metav1.OwnerReference{{APIVersion: apitest.InfraV1beta1, Kind: "VSphereVM", Name: "vm-a", UID: "old"}},
			seed: func(r *apitest.ObjectReader) {
				r.Add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork(nil, []string{"00:50:56:00:00:01"}))
			},
			want:     Found{Source: vmSource, Unknown: "VSphereVM ns/vm-a is not the one that owns the claim (UID VSphereVM/vm-a)"},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name: "no owner: no machine, no MAC",
		},
		{
			name:        "owned by a Machine only: no interface to read",
			claimOwners: []metav1.OwnerReference{apitest.MachineRef("machine-a")},
		},
		{
			name:        "an error other than not found is returned",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *apitest.ObjectReader) {
				r.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.Add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
			},
			errs:     map[string]error{"BareMetalHost/hosts/host-0": apierrors.NewServiceUnavailable("etcd")},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := &apitest.ObjectReader{Errs: tt.errs}
			if tt.seed != nil {
				tt.seed(reader)
			}
			name := tt.claimName
			if name == "" {
				name = "claim-0"
			}
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: tt.claimOwners}}
			got, err := (&Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds}).Lookup(context.Background(), claim)
			assert.Equal(t, tt.wantGets, reader.Gets)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{
		"52:54:00:AA:BB:01": "52:54:00:aa:bb:01",
		"52-54-00-aa-bb-01": "52:54:00:aa:bb:01",
		"5254.00aa.bb01":    "52:54:00:aa:bb:01",
		"52:54:00:aa:bb":    "",
		"":                  "",
		// 64-bit EUI and InfiniBand addresses are not what a fixed address takes.
		"02:00:5e:10:00:00:00:01": "",
	} {
		got, err := Normalize(in)
		if want == "" {
			assert.Error(t, err, in)
			continue
		}
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

// TestMACWatchersMapSourcesToClaims: an event on a source object wakes the
// claims whose MAC it holds, and no others; a forgotten claim is not woken.
func TestMACWatchersMapSourcesToClaims(t *testing.T) {
	m := &Sources{}
	host := Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	m.Watch(host, a)
	m.Watch(host, b)
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "hosts", Name: "host-0"}}
	var told []types.NamespacedName
	tell := func(claim types.NamespacedName) { told = append(told, claim) }
	assert.Len(t, m.MapClaims(BareMetalHostKind, tell)(context.Background(), obj), 2)
	assert.ElementsMatch(t, []types.NamespacedName{a, b}, told, "a change is told for each claim")
	told = nil
	assert.Empty(t, m.MapClaims(VSphereVMKind, tell)(context.Background(), obj), "another kind's namesake")
	assert.Len(t, m.MapClaims(BareMetalHostKind, nil)(context.Background(), obj), 2, "a listing wakes too")
	assert.Empty(t, told)

	m.Forget(a)
	reqs := m.MapClaims(BareMetalHostKind, tell)(context.Background(), obj)
	require.Len(t, reqs, 1)
	assert.Equal(t, b, reqs[0].NamespacedName)

	// A claim whose MAC now comes from elsewhere is woken by that only.
	m.Watch(Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-1"}}, b)
	assert.Empty(t, m.MapClaims(BareMetalHostKind, tell)(context.Background(), obj))
}

func TestMACSourceAnnotationRoundTrip(t *testing.T) {
	src := Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	assert.Equal(t, "BareMetalHost.metal3.io/hosts/host-0", src.Key())
	got, ok := ParseSource(src.Key())
	require.True(t, ok)
	assert.Equal(t, src, got)
	for _, bad := range []string{"", "BareMetalHost.metal3.io", "BareMetalHost.metal3.io/hosts", "/hosts/host-0"} {
		_, ok := ParseSource(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// TestKindWatchesStartOnceAndRetryAKindNotServed: a kind's watch starts
// at the first need and never again; a kind the API server does not serve
// is tried again on a later need, not more often than kindWatchRetry.
func TestKindWatchesStartOnceAndRetryAKindNotServed(t *testing.T) {
	served := map[schema.GroupKind]bool{BareMetalHostKind: true}
	var starts []schema.GroupKind
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := NewKindWatches(logr.Discard(), func(kind schema.GroupKind) error {
		starts = append(starts, kind)
		if !served[kind] {
			return errors.New("no matches for kind")
		}
		return nil
	})
	w.now = func() time.Time { return now }

	w.ensure(BareMetalHostKind)
	w.ensure(BareMetalHostKind)
	assert.Equal(t, []schema.GroupKind{BareMetalHostKind}, starts, "started once")

	w.ensure(VSphereVMKind)
	now = now.Add(kindWatchRetry / 2)
	w.ensure(VSphereVMKind)
	assert.Equal(t, []schema.GroupKind{BareMetalHostKind, VSphereVMKind}, starts, "not served: not tried again at once")

	served[VSphereVMKind] = true
	now = now.Add(kindWatchRetry)
	w.ensure(VSphereVMKind)
	w.ensure(VSphereVMKind)
	assert.Equal(t, []schema.GroupKind{BareMetalHostKind, VSphereVMKind, VSphereVMKind}, starts, "served now: started on a later need, once")

	var none *kindWatches
	none.ensure(BareMetalHostKind) // no watches (a reconciler without a manager): nothing to start
}

// TestMACSourceListingWakesWithoutComparing: the watch's first listing (a
// restart, or a watch started late) wakes the claims that read an object,
// so that a waiting claim looks again, but marks no bound claim due for a
// comparison, which would read its owner chain past the cache; a change
// does both, and is told (it ends the claim's hold).
func TestMACSourceListingWakesWithoutComparing(t *testing.T) {
	host := Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "hosts", Name: "host-0"}}
	claim := types.NamespacedName{Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name    string
		send    func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		wantDue bool
	}{
		{name: "listed", wantDue: false, send: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: obj, IsInInitialList: true}, q)
		}},
		{name: "created", wantDue: true, send: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: obj}, q)
		}},
		{name: "updated", wantDue: true, send: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
		}},
		{name: "deleted", wantDue: true, send: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(context.Background(), event.DeleteEvent{Object: obj}, q)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Sources{}
			m.remember(host, claim)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			told := false
			tc.send(m.SourceEvents(BareMetalHostKind, func(types.NamespacedName) { told = true }), q)
			require.Equal(t, 1, q.Len(), "the claim is woken")
			got, _ := q.Get()
			assert.Equal(t, claim, got.NamespacedName)
			assert.Equal(t, tc.wantDue, m.TakeDue(claim))
			assert.Equal(t, tc.wantDue, told, "a change, not a listing, is told")
		})
	}
}
