package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// objectReader serves whole objects, by kind, namespace and name, as
// metadata or unstructured, and records what was read.
type objectReader struct {
	objects map[string]*unstructured.Unstructured
	errs    map[string]error
	gets    []string
}

func (r *objectReader) add(kind, namespace, name string, owners []metav1.OwnerReference, annotations map[string]string, content map[string]any) {
	if r.objects == nil {
		r.objects = map[string]*unstructured.Unstructured{}
	}
	u := &unstructured.Unstructured{Object: content}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(types.UID(kind + "/" + name))
	u.SetOwnerReferences(owners)
	u.SetAnnotations(annotations)
	r.objects[kind+"/"+namespace+"/"+name] = u
}

func (r *objectReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	k := kind + "/" + key.Namespace + "/" + key.Name
	r.gets = append(r.gets, k)
	if err := r.errs[k]; err != nil {
		return err
	}
	u, ok := r.objects[k]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
	}
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		o.Namespace, o.Name, o.UID = u.GetNamespace(), u.GetName(), u.GetUID()
		o.OwnerReferences, o.Annotations = u.GetOwnerReferences(), u.GetAnnotations()
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		o.Object = u.DeepCopy().Object
		o.SetGroupVersionKind(gvk)
	default:
		return errors.New("the MAC lookup reads metadata or unstructured objects only")
	}
	return nil
}

func (r *objectReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the MAC lookup must not list")
}

func TestMACAddressesLookup(t *testing.T) {
	metal3Data := ownerRef(infraV1beta1, "Metal3Data", "workers-0")
	dataClaim := ownerRef(infraV1beta1, "Metal3DataClaim", "m3m-a")
	m3m := ownerRef(infraV1beta1, "Metal3Machine", "m3m-a")
	vm := ownerRef(infraV1beta1, "VSphereVM", "vm-a")
	hostAnnotation := map[string]string{bareMetalHostAnnotation: "hosts/host-0"}
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
	hostSource := macSource{Kind: bareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	vmSource := macSource{Kind: vsphereVMKind, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-a"}}

	tests := []struct {
		name        string
		claimName   string
		claimOwners []metav1.OwnerReference
		seed        func(r *objectReader)
		errs        map[string]error
		want        machineMAC
		wantGets    []string
		wantErr     bool
	}{
		{
			name:        "Metal3: Metal3Data, Metal3Machine, the BareMetalHost's bootMACAddress",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{dataClaim, m3m}, nil, nil)
				r.add("Metal3DataClaim", "ns", "m3m-a", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52-54-00-AA-BB-01"))
			},
			want:     machineMAC{MAC: "52:54:00:aa:bb:01", Source: hostSource},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: through the Metal3DataClaim when the Metal3Data names no Metal3Machine",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{dataClaim}, nil, nil)
				r.add("Metal3DataClaim", "ns", "m3m-a", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52:54:00:aa:bb:01"))
			},
			want:     machineMAC{MAC: "52:54:00:aa:bb:01", Source: hostSource},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3DataClaim/ns/m3m-a", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the host has no bootMACAddress yet",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.add("BareMetalHost", "hosts", "host-0", nil, nil, map[string]any{"spec": map[string]any{}})
			},
			want:     machineMAC{Source: hostSource, Unknown: "BareMetalHost hosts/host-0 has no spec.bootMACAddress yet"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the host is gone",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
			},
			want:     machineMAC{Source: hostSource, Unknown: "BareMetalHost hosts/host-0 not found"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "Metal3: the Metal3Machine names no host",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, nil, nil)
			},
			want:     machineMAC{Unknown: "Metal3Machine ns/m3m-a names no BareMetalHost in its annotation metal3.io/BareMetalHost"},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a"},
		},
		{
			name:        "Metal3: a malformed bootMACAddress",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
				r.add("BareMetalHost", "hosts", "host-0", nil, nil, bmh("52:54:00"))
			},
			want: machineMAC{Source: hostSource,
				Unknown: `BareMetalHost hosts/host-0 spec.bootMACAddress: "52:54:00" is not a 48-bit MAC address`},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
		},
		{
			name:        "CAPV: the MAC vSphere gave the device, as the VSphereVM's status reports it (checked once bound)",
			claimName:   "vm-a-1-0",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *objectReader) {
				r.add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{"", ""}, []string{"00:50:56:00:00:01", "00:50:56:00:00:02"}))
			},
			want:     machineMAC{MAC: "00:50:56:00:00:02", Source: vmSource},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name:        "CAPV: a MAC set in the device's spec is known before the VM is cloned",
			claimName:   "vm-a-0-2",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *objectReader) {
				r.add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{"00:50:56:AB:CD:EF"}, nil))
			},
			want:     machineMAC{MAC: "00:50:56:ab:cd:ef", Source: vmSource},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name:        "CAPV: no MAC in the device's spec, none reported: deferred, never waited for",
			claimName:   "vm-a-0-0",
			claimOwners: []metav1.OwnerReference{vm},
			seed: func(r *objectReader) {
				r.add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork([]string{""}, nil))
			},
			want: machineMAC{Source: vmSource, Deferred: "VSphereVM ns/vm-a sets no spec.network.devices[0].macAddr, and CAPV reports " +
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
			claimOwners: []metav1.OwnerReference{{APIVersion: infraV1beta1, Kind: "VSphereVM", Name: "vm-a", UID: "old"}},
			seed: func(r *objectReader) {
				r.add("VSphereVM", "ns", "vm-a", nil, nil, vmNetwork(nil, []string{"00:50:56:00:00:01"}))
			},
			want:     machineMAC{Source: vmSource, Unknown: "VSphereVM ns/vm-a is not the one that owns the claim (UID VSphereVM/vm-a)"},
			wantGets: []string{"VSphereVM/ns/vm-a"},
		},
		{
			name: "no owner: no machine, no MAC",
		},
		{
			name:        "owned by a Machine only: no interface to read",
			claimOwners: []metav1.OwnerReference{machineRef("machine-a")},
		},
		{
			name:        "an error other than not found is returned",
			claimOwners: []metav1.OwnerReference{metal3Data},
			seed: func(r *objectReader) {
				r.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
				r.add("Metal3Machine", "ns", "m3m-a", nil, hostAnnotation, nil)
			},
			errs:     map[string]error{"BareMetalHost/hosts/host-0": apierrors.NewServiceUnavailable("etcd")},
			wantGets: []string{"Metal3Data/ns/workers-0", "Metal3Machine/ns/m3m-a", "BareMetalHost/hosts/host-0"},
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := &objectReader{errs: tt.errs}
			if tt.seed != nil {
				tt.seed(reader)
			}
			name := tt.claimName
			if name == "" {
				name = "claim-0"
			}
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: tt.claimOwners}}
			got, err := (&MACAddresses{Reader: reader, Follow: consumerOwnerKinds}).Lookup(context.Background(), claim)
			assert.Equal(t, tt.wantGets, reader.gets)
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
		got, err := NormalizeMAC(in)
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
	m := &MACAddresses{}
	host := macSource{Kind: bareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	m.watch(host, a)
	m.watch(host, b)
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "hosts", Name: "host-0"}}
	assert.Len(t, m.mapClaims(bareMetalHostKind, true)(context.Background(), obj), 2)
	assert.Empty(t, m.mapClaims(vsphereVMKind, true)(context.Background(), obj), "another kind's namesake")

	m.forget(a)
	reqs := m.mapClaims(bareMetalHostKind, true)(context.Background(), obj)
	require.Len(t, reqs, 1)
	assert.Equal(t, b, reqs[0].NamespacedName)

	// A claim whose MAC now comes from elsewhere is woken by that only.
	m.watch(macSource{Kind: bareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-1"}}, b)
	assert.Empty(t, m.mapClaims(bareMetalHostKind, true)(context.Background(), obj))
}

func TestMACSourceAnnotationRoundTrip(t *testing.T) {
	src := macSource{Kind: bareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
	assert.Equal(t, "BareMetalHost.metal3.io/hosts/host-0", src.key())
	got, ok := parseMACSource(src.key())
	require.True(t, ok)
	assert.Equal(t, src, got)
	for _, bad := range []string{"", "BareMetalHost.metal3.io", "BareMetalHost.metal3.io/hosts", "/hosts/host-0"} {
		_, ok := parseMACSource(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// TestBoundClaimsCompareTheirMACOnlyWhenTheirSourceChanged: a bound claim
// compares its MAC once, and then only after an event on its source; a
// restarted manager (a fresh MACAddresses) reads nothing for the claims
// whose comparison is on record.
func TestBoundClaimsCompareTheirMACOnlyWhenTheirSourceChanged(t *testing.T) {
	m3m := ownerRef(infraV1beta1, "Metal3Machine", "m3m-a")
	reader := &objectReader{}
	reader.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
	reader.add("Metal3Machine", "ns", "m3m-a", nil, map[string]string{bareMetalHostAnnotation: "ns/host-0"}, nil)
	reader.add("BareMetalHost", "ns", "host-0", nil, nil, map[string]any{"spec": map[string]any{"bootMACAddress": "52:54:00:aa:bb:01"}})
	pool := machineMACPool()
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-0-pool",
		OwnerReferences: []metav1.OwnerReference{ownerRef(infraV1beta1, "Metal3Data", "workers-0")},
		Annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
			v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0"}}}
	r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), MACAddresses: &MACAddresses{Reader: reader, Follow: consumerOwnerKinds}}
	ctx := context.Background()

	require.NoError(t, r.checkBoundMAC(ctx, claim, pool))
	assert.Len(t, reader.gets, 3, "the first comparison reads the chain")
	assert.Equal(t, v1alpha1.MACAddressMatchesReason, conditions.GetReason(claim, v1alpha1.MACAddressCurrentCondition))

	reader.gets = nil
	require.NoError(t, r.checkBoundMAC(ctx, claim, pool))
	r.MACAddresses = &MACAddresses{Reader: reader, Follow: consumerOwnerKinds} // a restart
	require.NoError(t, r.checkBoundMAC(ctx, claim, pool))
	assert.Empty(t, reader.gets, "a resync or a restart reads nothing")

	host := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "host-0"}}
	reqs := r.MACAddresses.mapClaims(bareMetalHostKind, true)(ctx, host)
	require.Len(t, reqs, 1, "the restarted manager maps the host to the claim from its annotation")
	require.NoError(t, unstructured.SetNestedField(reader.objects["BareMetalHost/ns/host-0"].Object, "52:54:00:aa:bb:02", "spec", "bootMACAddress"))
	require.NoError(t, r.checkBoundMAC(ctx, claim, pool))
	assert.Len(t, reader.gets, 3, "an event on the source makes it compare again")
	assert.Equal(t, v1alpha1.MACAddressChangedReason, conditions.GetReason(claim, v1alpha1.MACAddressCurrentCondition))
}

// TestARefusedMACIsReadAgainUnlessSetByHand: when the grid refuses a
// claim's MAC (another fixed address holds it), a MAC the provider read
// from the machine is dropped with its source, so that the next attempt
// reads the machine's MAC again; a MAC set by hand stays, and the message
// says to correct it. The refused claim waits for its backoff, reading
// nothing, unless the object its MAC comes from changes first.
func TestARefusedMACIsReadAgainUnlessSetByHand(t *testing.T) {
	m3m := ownerRef(infraV1beta1, "Metal3Machine", "m3m-a")
	pool := machineMACPool()
	refusal := fmt.Errorf("allocating: MAC address 52:54:00:aa:bb:01 is held by fixedaddress/abc (10.0.0.5): %w", backends.ErrMACAddressInUse)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		// wantKept: the annotations the refusal leaves; wantMessage is in
		// the claim's Ready message.
		wantKept    map[string]string
		wantMessage string
	}{
		{
			name: "read from the machine: dropped, read again",
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
				v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"},
			wantKept:    map[string]string{"other": "kept"},
			wantMessage: "the MAC was read from BareMetalHost ns/host-0, and is read again at the claim's next attempt",
		},
		{
			name:        "set by hand: kept, to be corrected",
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01", "other": "kept"},
			wantKept:    map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01", "other": "kept"},
			wantMessage: "the MAC is the one the claim's annotation ipam-bridge.github.io/mac-address sets: correct it there",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := &objectReader{}
			reader.add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
			reader.add("Metal3Machine", "ns", "m3m-a", nil, map[string]string{bareMetalHostAnnotation: "ns/host-0"}, nil)
			reader.add("BareMetalHost", "ns", "host-0", nil, nil, map[string]any{"spec": map[string]any{"bootMACAddress": "52:54:00:aa:bb:09"}})
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-0-pool",
				OwnerReferences: []metav1.OwnerReference{ownerRef(infraV1beta1, "Metal3Data", "workers-0")},
				Annotations:     maps.Clone(tc.annotations)}}
			r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), waits: newWaitBackoff(firstRetryInterval, time.Hour), holds: newHolds(clock.RealClock{}),
				MACAddresses: &MACAddresses{Reader: reader, Follow: consumerOwnerKinds}}
			ctx := context.Background()

			result, err := r.allocationFailed(claim, refusal)
			require.NoError(t, err, "a wait, not a failed reconcile")
			assert.Equal(t, firstRetryInterval, result.RequeueAfter)
			assert.Equal(t, tc.wantKept, claim.Annotations)
			ready := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
			require.NotNil(t, ready)
			assert.Equal(t, MACAddressInUseReason, ready.Reason)
			assert.Contains(t, ready.Message, "is held by fixedaddress/abc")
			assert.Contains(t, ready.Message, tc.wantMessage)

			// The claim's own write brings it back at once: it waits.
			_, later, err := r.macForAllocation(ctx, claim, pool)
			require.NoError(t, err)
			require.NotNil(t, later)
			assert.Positive(t, later.RequeueAfter)
			assert.Empty(t, reader.gets, "held back, nothing is read")

			// The host changes: the claim looks at once.
			host := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "host-0"}}
			woken := r.MACAddresses.mapClaims(bareMetalHostKind, true)(ctx, host)
			mac, later, err := r.macForAllocation(ctx, claim, pool)
			require.NoError(t, err)
			if _, byHand := tc.wantKept[v1alpha1.MACAddressAnnotation]; byHand {
				// Not woken by the host, which it does not read; still
				// held back while the refused MAC stays. Its correction
				// ends the wait at once, with the MAC now set.
				assert.Empty(t, woken)
				require.NotNil(t, later)
				claim.Annotations[v1alpha1.MACAddressAnnotation] = "52:54:00:aa:bb:02"
				mac, later, err = r.macForAllocation(ctx, claim, pool)
				require.NoError(t, err)
				assert.Nil(t, later)
				assert.Equal(t, "52:54:00:aa:bb:02", mac)
				return
			}
			require.Len(t, woken, 1)
			require.NotNil(t, later, "the MAC read again is written before the reservation")
			assert.Empty(t, mac)
			assert.Equal(t, "52:54:00:aa:bb:09", claim.Annotations[v1alpha1.MACAddressAnnotation], "the host's MAC now")
			assert.Equal(t, "BareMetalHost.metal3.io/ns/host-0", claim.Annotations[v1alpha1.MACAddressSourceAnnotation])
		})
	}
}

// TestDescribeRecordMAC: once bound, a claim of a pool whose fixed
// addresses carry the machine's MAC names the MAC its record carries, or
// none; the annotations of a claim of any other pool are not the
// provider's to touch.
func TestDescribeRecordMAC(t *testing.T) {
	machinePool := machineMACPool()
	plainPool := &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Reservation: v1alpha1.InfobloxReservation{MACAddress: v1alpha1.InfobloxMACNone}}}
	read := map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
		v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"}
	for _, tc := range []struct {
		name        string
		pool        Pool
		annotations map[string]string
		carried     string
		want        map[string]string
	}{
		{name: "the MAC asked for", pool: machinePool, annotations: read, carried: "52:54:00:aa:bb:01", want: read},
		{name: "a plan's MAC: the machine's source stays, to compare with", pool: machinePool, annotations: read, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99",
				v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"}},
		{name: "none: both go", pool: machinePool, annotations: read, want: map[string]string{"other": "kept"}},
		{name: "none, none asked for", pool: machinePool, want: nil},
		{name: "set by hand, the plan carries another", pool: machinePool,
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01"}, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99"}},
		{name: "not annotated before", pool: machinePool, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99"}},
		{name: "a pool without the setting: untouched", pool: plainPool, annotations: read, want: read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(tc.annotations)}}
			describeRecordMAC(claim, tc.pool, tc.carried)
			assert.Equal(t, tc.want, claim.Annotations)
		})
	}
}

// TestKindWatchesStartOnceAndRetryAKindNotServed: a kind's watch starts
// at the first need and never again; a kind the API server does not serve
// is tried again on a later need, not more often than kindWatchRetry.
func TestKindWatchesStartOnceAndRetryAKindNotServed(t *testing.T) {
	served := map[schema.GroupKind]bool{bareMetalHostKind: true}
	var starts []schema.GroupKind
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := newKindWatches(logr.Discard(), func(kind schema.GroupKind) error {
		starts = append(starts, kind)
		if !served[kind] {
			return errors.New("no matches for kind")
		}
		return nil
	})
	w.now = func() time.Time { return now }

	w.ensure(bareMetalHostKind)
	w.ensure(bareMetalHostKind)
	assert.Equal(t, []schema.GroupKind{bareMetalHostKind}, starts, "started once")

	w.ensure(vsphereVMKind)
	now = now.Add(kindWatchRetry / 2)
	w.ensure(vsphereVMKind)
	assert.Equal(t, []schema.GroupKind{bareMetalHostKind, vsphereVMKind}, starts, "not served: not tried again at once")

	served[vsphereVMKind] = true
	now = now.Add(kindWatchRetry)
	w.ensure(vsphereVMKind)
	w.ensure(vsphereVMKind)
	assert.Equal(t, []schema.GroupKind{bareMetalHostKind, vsphereVMKind, vsphereVMKind}, starts, "served now: started on a later need, once")

	var none *kindWatches
	none.ensure(bareMetalHostKind) // no watches (a reconciler without a manager): nothing to start
}

// TestMACAddressDeferredIsSaidOncePerClaim: a CAPV claim reserved without
// a MAC is told so once, however often its reservation is tried; a claim
// of the same name made after it is gone is told again.
func TestMACAddressDeferredIsSaidOncePerClaim(t *testing.T) {
	reader := &objectReader{}
	reader.add("VSphereVM", "ns", "vm-a", nil, nil, map[string]any{"spec": map[string]any{"network": map[string]any{
		"devices": []any{map[string]any{"networkName": "vm-network"}}}}})
	pool := machineMACPool()
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-a-0-0",
		OwnerReferences: []metav1.OwnerReference{ownerRef(infraV1beta1, "VSphereVM", "vm-a")}}}
	recorder := events.NewFakeRecorder(10)
	r := &ClaimReconciler{Recorder: recorder, MACAddresses: &MACAddresses{Reader: reader, Follow: consumerOwnerKinds}}
	ctx := context.Background()
	deferrals := func() int {
		n := 0
		for {
			select {
			case e := <-recorder.Events:
				assert.Contains(t, e, MACAddressDeferredReason)
				n++
			default:
				return n
			}
		}
	}

	for range 3 {
		mac, later, err := r.macForAllocation(ctx, claim, pool)
		require.NoError(t, err)
		assert.Nil(t, later, "reserved at once")
		assert.Empty(t, mac)
	}
	assert.Equal(t, 1, deferrals(), "said once")

	r.MACAddresses.forget(client.ObjectKeyFromObject(claim))
	_, _, err := r.macForAllocation(ctx, claim, pool)
	require.NoError(t, err)
	assert.Equal(t, 1, deferrals(), "a claim of the same name, after the first is gone")
}

// machineMACPool is an Infoblox pool of an IPv4 network whose fixed
// addresses carry the machine's MAC.
func machineMACPool() *v1alpha1.InfobloxIPPool {
	return &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{
		Sources:     []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.0.0.0/24"}}},
		Reservation: v1alpha1.InfobloxReservation{MACAddress: v1alpha1.InfobloxMACMachine},
	}}
}

// TestOnlyIPv4FixedAddressesCarryTheMachinesMAC: an IPv6 fixed address
// matches a DUID, not a MAC, so a pool of IPv6 sources alone has its claims
// wait for no MAC; a pool with one IPv4 source does.
func TestOnlyIPv4FixedAddressesCarryTheMachinesMAC(t *testing.T) {
	network := func(cidr string) v1alpha1.InfobloxAddressSource {
		return v1alpha1.InfobloxAddressSource{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}
	}
	ipRange := func(start, end string) v1alpha1.InfobloxAddressSource {
		return v1alpha1.InfobloxAddressSource{Range: &v1alpha1.InfobloxRangeSource{Start: start, End: end}}
	}
	for _, tc := range []struct {
		name    string
		setting v1alpha1.InfobloxMACAddress
		sources []v1alpha1.InfobloxAddressSource
		want    bool
	}{
		{name: "an IPv4 network", setting: v1alpha1.InfobloxMACMachine, sources: []v1alpha1.InfobloxAddressSource{network("10.0.0.0/24")}, want: true},
		{name: "an IPv4 range", setting: v1alpha1.InfobloxMACMachine, sources: []v1alpha1.InfobloxAddressSource{ipRange("10.0.0.10", "10.0.0.20")}, want: true},
		{name: "IPv6 then IPv4", setting: v1alpha1.InfobloxMACMachine,
			sources: []v1alpha1.InfobloxAddressSource{network("2001:db8::/64"), network("10.0.0.0/24")}, want: true},
		{name: "IPv6 alone", setting: v1alpha1.InfobloxMACMachine,
			sources: []v1alpha1.InfobloxAddressSource{network("2001:db8::/64"), ipRange("2001:db8:1::10", "2001:db8:1::20")}, want: false},
		{name: "not asked for", setting: v1alpha1.InfobloxMACNone, sources: []v1alpha1.InfobloxAddressSource{network("10.0.0.0/24")}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Sources: tc.sources,
				Reservation: v1alpha1.InfobloxReservation{MACAddress: tc.setting}}}
			assert.Equal(t, tc.want, wantsMachineMAC(pool))
		})
	}
	assert.False(t, wantsMachineMAC(&v1alpha1.NetboxIPPool{}), "NetBox has no DHCP")
}

// TestMACSourceListingWakesWithoutComparing: the watch's first listing (a
// restart, or a watch started late) wakes the claims that read an object,
// so that a waiting claim looks again, but marks no bound claim due for a
// comparison, which would read its owner chain past the cache; a change
// does both.
func TestMACSourceListingWakesWithoutComparing(t *testing.T) {
	host := macSource{Kind: bareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: "hosts", Name: "host-0"}}
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
			m := &MACAddresses{}
			m.remember(host, claim)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.send(m.sourceEvents(bareMetalHostKind), q)
			require.Equal(t, 1, q.Len(), "the claim is woken")
			got, _ := q.Get()
			assert.Equal(t, claim, got.NamespacedName)
			assert.Equal(t, tc.wantDue, m.takeDue(claim))
		})
	}
}
