package macaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestAwaitedSourceUpdatesWakeOnlyWaitingClaims: a status update of a
// VSphereVM passes the watch only while a claim waits to write the MAC it
// reports.
func TestAwaitedSourceUpdatesWakeOnlyWaitingClaims(t *testing.T) {
	m := &Sources{}
	src := Source{Kind: VSphereVMKind, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-a"}}
	claim := types.NamespacedName{Namespace: "ns", Name: "vm-a-0-0"}
	m.remember(src, claim)
	vm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-a"}}
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-b"}}
	p := m.AwaitedSourceChanged(VSphereVMKind)

	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: vm, ObjectNew: vm}), "a bound claim that waits for nothing")
	m.Await(claim)
	assert.True(t, p.Update(event.UpdateEvent{ObjectOld: vm, ObjectNew: vm}))
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: other, ObjectNew: other}), "another VM")
	m.Forget(claim)
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: vm, ObjectNew: vm}), "the claim is gone")
}
