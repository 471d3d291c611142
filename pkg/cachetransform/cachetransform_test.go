package cachetransform

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// fresh returns a copy of s in memory of its own, as a decoder would.
func fresh(s string) string { return string([]byte(s)) }

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func sameMap(a, b map[string]string) bool {
	return a != nil && b != nil && *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

func claim(name string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: fresh("ipam.cluster.x-k8s.io/v1beta2"), Kind: fresh("IPAddressClaim")},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: fresh("ns"), UID: "uid-" + "x",
			Labels:        map[string]string{fresh(clusterv1.ClusterNameLabel): fresh("c1")},
			Annotations:   map[string]string{fresh(v1alpha1.MachineNameAnnotation): fresh(name), corev1.LastAppliedConfigAnnotation: "{}"},
			Finalizers:    []string{fresh("ipam-bridge.github.io/release-address")},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: fresh("ipam-bridge.github.io"), Kind: fresh("NetboxIPPool"), Name: fresh("pool")}},
		Status: ipamv1.IPAddressClaimStatus{Conditions: []metav1.Condition{
			{Type: fresh("Ready"), Status: metav1.ConditionTrue, Reason: fresh("AddressAllocated"), Message: fresh("")},
		}},
	}
}

func TestDefaultDropsWhatNothingReads(t *testing.T) {
	tr := New().Default()
	c := claim("a")
	if _, err := tr(c); err != nil {
		t.Fatal(err)
	}
	if c.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	if _, ok := c.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Error("last-applied configuration kept")
	}
	// Everything else is kept, value for value.
	want := claim("a")
	want.ManagedFields = nil
	delete(want.Annotations, corev1.LastAppliedConfigAnnotation)
	if c.Name != want.Name || c.Namespace != want.Namespace || c.UID != want.UID ||
		c.Labels[clusterv1.ClusterNameLabel] != "c1" || len(c.Labels) != 1 ||
		c.Annotations[v1alpha1.MachineNameAnnotation] != "a" || len(c.Annotations) != 1 ||
		len(c.Finalizers) != 1 || c.Finalizers[0] != want.Finalizers[0] ||
		c.Spec != want.Spec || len(c.Status.Conditions) != 1 || c.Status.Conditions[0] != want.Status.Conditions[0] ||
		c.TypeMeta != want.TypeMeta {
		t.Errorf("transformed claim differs beyond what is dropped:\n%+v\nwant\n%+v", c, want)
	}
}

func TestDefaultSharesWhatObjectsRepeat(t *testing.T) {
	tr := New().Default()
	a, b := claim("a"), claim("b")
	for _, o := range []*ipamv1.IPAddressClaim{a, b} {
		if _, err := tr(o); err != nil {
			t.Fatal(err)
		}
	}
	if !sameMap(a.Labels, b.Labels) {
		t.Error("equal label sets are not shared")
	}
	for name, pair := range map[string][2]string{
		"namespace":      {a.Namespace, b.Namespace},
		"finalizer":      {a.Finalizers[0], b.Finalizers[0]},
		"pool kind":      {a.Spec.PoolRef.Kind, b.Spec.PoolRef.Kind},
		"pool name":      {a.Spec.PoolRef.Name, b.Spec.PoolRef.Name},
		"condition":      {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
		"kind":           {a.Kind, b.Kind},
		"annotation key": {firstKey(a.Annotations), firstKey(b.Annotations)},
	} {
		if !sameString(pair[0], pair[1]) {
			t.Errorf("%s is not shared", name)
		}
	}
	if a.Annotations[v1alpha1.MachineNameAnnotation] != "a" || b.Annotations[v1alpha1.MachineNameAnnotation] != "b" {
		t.Error("annotation values mixed up")
	}

	other := claim("c")
	other.Labels["extra"] = "1"
	if _, err := tr(other); err != nil {
		t.Fatal(err)
	}
	if sameMap(other.Labels, a.Labels) || len(other.Labels) != 2 || len(a.Labels) != 1 {
		t.Error("different label sets are shared")
	}
}

func TestDefaultIsIdempotent(t *testing.T) {
	tr := New().Default()
	c := claim("a")
	for range 2 {
		if _, err := tr(c); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Labels) != 1 || len(c.Annotations) != 1 || c.Annotations[v1alpha1.MachineNameAnnotation] != "a" {
		t.Errorf("a second pass changed the claim: %+v", c.ObjectMeta)
	}
}

func TestDefaultKeepsAnAddressesReservation(t *testing.T) {
	tr := New().Default()
	address := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Annotations: map[string]string{
			v1alpha1.ReservationEndpointAnnotation: "https://netbox", v1alpha1.ReservationScopeAnnotation: "vrf/global",
			v1alpha1.ReservationRecordAnnotation: "ipam/ip-addresses/7",
		}},
		Spec: ipamv1.IPAddressSpec{Address: "10.0.0.7", Prefix: ptr.To[int32](24), Gateway: "10.0.0.1",
			ClaimRef: ipamv1.IPAddressClaimReference{Name: "a"},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: "ipam-bridge.github.io", Kind: "NetboxIPPool", Name: "pool"}},
	}
	want := address.DeepCopy()
	if _, err := tr(address); err != nil {
		t.Fatal(err)
	}
	if len(address.Annotations) != 3 || address.Annotations[v1alpha1.ReservationRecordAnnotation] != "ipam/ip-addresses/7" ||
		address.Annotations[v1alpha1.ReservationEndpointAnnotation] != "https://netbox" ||
		address.Spec.Address != want.Spec.Address || *address.Spec.Prefix != 24 || address.Spec.Gateway != want.Spec.Gateway ||
		address.Spec.ClaimRef != want.Spec.ClaimRef || address.Spec.PoolRef != want.Spec.PoolRef {
		t.Errorf("address changed: %+v", address)
	}
}

func TestDefaultOnMetadataOnly(t *testing.T) {
	tr := New().Default()
	secret := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns",
		Labels:      map[string]string{v1alpha1.CredentialsLabel: "true"},
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"…"}}`},
		Finalizers:  []string{v1alpha1.CredentialsInUseFinalizer}}}
	if _, err := tr(secret); err != nil {
		t.Fatal(err)
	}
	if secret.Annotations != nil || secret.Labels[v1alpha1.CredentialsLabel] != "true" || len(secret.Finalizers) != 1 {
		t.Errorf("Secret metadata: %+v", secret.ObjectMeta)
	}
}

func TestClusterKeepsWhatTheProviderReads(t *testing.T) {
	tr := New().Cluster()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns", Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
		Spec: clusterv1.ClusterSpec{
			Paused:   ptr.To(true),
			Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.33.0"},
		},
		Status: clusterv1.ClusterStatus{Phase: "Provisioned"},
	}
	if _, err := tr(cluster); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(cluster.Spec.Paused, false) || cluster.Name != "c1" || len(cluster.Annotations) != 1 {
		t.Errorf("what the provider reads is gone: %+v", cluster)
	}
	if cluster.Spec.Topology.ClassRef.Name != "class" {
		t.Errorf("the ClusterClass, whose annotations may opt the Cluster in, is gone: %+v", cluster)
	}
	if cluster.Spec.Topology.Version != "" || cluster.Status.Phase != "" {
		t.Errorf("topology or status kept: %+v", cluster)
	}
}

func TestLabelSetsAreBounded(t *testing.T) {
	var s labelSets
	for i := range 3 * maxLabelSets {
		s.share(map[string]string{"name": string(rune('a'+i%26)) + string(rune(i))})
	}
	if len(s.sets) > maxLabelSets {
		t.Errorf("%d label sets remembered, at most %d", len(s.sets), maxLabelSets)
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
