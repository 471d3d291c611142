package macaddress

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Await remembers a bound claim that waits for its machine to report the
// MAC its record gets: the updates of its source object wake it, status
// updates included (awaitedSourceChanged).
func (m *Sources) Await(claim types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.awaiting == nil {
		m.awaiting = sets.New[types.NamespacedName]()
	}
	m.awaiting.Insert(claim)
}

// StopAwaiting forgets that the claim awaits its machine's MAC: it was
// written, or will not be.
func (m *Sources) StopAwaiting(claim types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.awaiting.Delete(claim)
}

// AwaitedSourceChanged lets through every update of a source object a
// claim awaits a MAC from: a VSphereVM reports the MAC vSphere gave a
// device in its status, which SourceChanged does not let through. The
// watch is metadata-only, so any update may be the one.
func (m *Sources) AwaitedSourceChanged(kind schema.GroupKind) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			for claim := range m.watchers[Source{Kind: kind, NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)}] {
				if m.awaiting.Has(claim) {
					return true
				}
			}
			return false
		},
	}
}

// Awaits says whether the claim awaits its machine's MAC.
func (m *Sources) Awaits(claim types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.awaiting.Has(claim)
}
