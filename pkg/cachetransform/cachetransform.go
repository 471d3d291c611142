// Package cachetransform holds the transforms the manager's cache applies
// to every object before it stores it. They drop what the provider never
// reads, and let the thousands of claims and IPAddresses of a burst share
// the strings and label sets they all repeat, so that the cache holds each
// once instead of once per object.
//
// The cache stays the source of truth for everything the provider reads:
// a transform removes only fields no reconciler, predicate or index reads,
// and sharing changes where a value is stored, not the value. Every patch
// the provider sends is a diff between two copies of a cached object, so a
// field the cache does not hold is never in a patch, and the API server
// keeps it as it is.
//
// Shared maps and strings are safe because nothing mutates a cached object:
// the cache hands reconcilers deep copies (which copy the maps), and event
// handlers and predicates only read.
package cachetransform

import (
	"sort"
	"strings"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// sharedValueAnnotations are the annotations whose values repeat across
// objects (one endpoint and scope per pool), so that their values are
// shared too; other annotations' values (a Machine's name, a record's path)
// are the object's own.
var sharedValueAnnotations = map[string]bool{
	v1alpha1.ReservationEndpointAnnotation: true,
	v1alpha1.ReservationScopeAnnotation:    true,
	clusterv1.PausedAnnotation:             true,
}

// CacheOptions are the manager's cache options: every kind with Default,
// Clusters with Cluster, all of them listed again every syncPeriod. Of
// Secrets the cache holds only those labelled as pools' credentials
// (v1alpha1.CredentialsLabel), and of those only their metadata (the
// provider watches Secrets metadata-only): RBAC cannot grant list and watch
// by label, so the selector is what keeps every other Secret of the
// cluster out of the manager's memory.
func CacheOptions(syncPeriod *time.Duration) cache.Options {
	t := New()
	return cache.Options{
		SyncPeriod:       syncPeriod,
		DefaultTransform: t.Default(),
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.Cluster{}: {Transform: t.Cluster()},
			&corev1.Secret{}: {
				Label:     labels.SelectorFromSet(labels.Set{v1alpha1.CredentialsLabel: "true"}),
				Transform: t.Default(),
			},
		},
	}
}

// Transforms are the cache's transforms. They share one table of label
// sets; use one Transforms per cache.
type Transforms struct {
	labels labelSets
}

// New returns the transforms of one cache.
func New() *Transforms { return &Transforms{} }

// Default is the transform of every kind that has none of its own. It
//   - drops managedFields, which nothing reads and which are, at thousands
//     of claims, a large share of what the cache would hold;
//   - drops the kubectl.kubernetes.io/last-applied-configuration
//     annotation, a copy of the whole object as last applied (of a Secret's
//     data too, for a Secret applied with kubectl), which nothing reads;
//   - lets objects share the strings they repeat (namespaces, label and
//     annotation keys, finalizers, owner kinds, pool references, condition
//     types and reasons) and their label sets.
func (t *Transforms) Default() toolscache.TransformFunc {
	return func(in any) (any, error) {
		t.compact(in)
		return in, nil
	}
}

// Cluster is the transform of Clusters: the provider reads of a Cluster
// only its metadata (its name, and the paused annotation), spec.paused,
// and the ClusterClass it is made from (whose annotations may opt it in to
// a control-plane endpoint), so the cache keeps only those. A Cluster's
// topology and status are most of its size. (The control-plane endpoint
// reconciler, package controllers/endpoint, reads the Clusters that opt in
// whole from the API server.)
func (t *Transforms) Cluster() toolscache.TransformFunc {
	return func(in any) (any, error) {
		if c, ok := in.(*clusterv1.Cluster); ok {
			c.Spec = clusterv1.ClusterSpec{Paused: c.Spec.Paused, Topology: clusterv1.Topology{ClassRef: c.Spec.Topology.ClassRef}}
			c.Status = clusterv1.ClusterStatus{}
		}
		t.compact(in)
		return in, nil
	}
}

// objectMeta is implemented by every typed object and by
// PartialObjectMetadata: the accessor returns the embedded ObjectMeta.
type objectMeta interface {
	GetObjectMeta() metav1.Object
}

func (t *Transforms) compact(in any) {
	if o, ok := in.(objectMeta); ok {
		if m, ok := o.GetObjectMeta().(*metav1.ObjectMeta); ok {
			t.compactMeta(m)
		}
	}
	switch o := in.(type) {
	case *ipamv1.IPAddressClaim:
		compactType(&o.TypeMeta)
		compactPoolRef(&o.Spec.PoolRef)
		intern(&o.Spec.ClusterName)
		compactConditions(o.Status.Conditions)
	case *ipamv1.IPAddress:
		compactType(&o.TypeMeta)
		compactPoolRef(&o.Spec.PoolRef)
		intern(&o.Spec.Gateway)
	case *metav1.PartialObjectMetadata:
		compactType(&o.TypeMeta)
	case *clusterv1.Cluster:
		compactType(&o.TypeMeta)
	}
}

func (t *Transforms) compactMeta(m *metav1.ObjectMeta) {
	// Nil-checked: setting nil managedFields on an object that has none
	// makes it differ from what the API server sent
	// (kubernetes/kubernetes#124337).
	if m.ManagedFields != nil {
		m.ManagedFields = nil
	}
	intern(&m.Namespace)
	intern(&m.GenerateName)
	m.Labels = t.labels.share(m.Labels)
	m.Annotations = compactAnnotations(m.Annotations)
	for i := range m.Finalizers {
		intern(&m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		intern(&ref.APIVersion)
		intern(&ref.Kind)
	}
}

// compactAnnotations drops the last-applied configuration and returns the
// annotations with shared keys (and, for a few keys, shared values).
func compactAnnotations(in map[string]string) map[string]string {
	if len(in) == 0 {
		return in
	}
	delete(in, corev1.LastAppliedConfigAnnotation)
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if sharedValueAnnotations[k] {
			v = internString(v)
		}
		out[internString(k)] = v
	}
	return out
}

func compactType(t *metav1.TypeMeta) {
	intern(&t.APIVersion)
	intern(&t.Kind)
}

func compactPoolRef(ref *ipamv1.IPPoolReference) {
	intern(&ref.APIGroup)
	intern(&ref.Kind)
	intern(&ref.Name)
}

func compactConditions(conditions []metav1.Condition) {
	for i := range conditions {
		c := &conditions[i]
		intern(&c.Type)
		c.Status = metav1.ConditionStatus(internString(string(c.Status)))
		intern(&c.Reason)
		intern(&c.Message)
	}
}

func intern(s *string) { *s = internString(*s) }

// internString returns the one copy of s that every object shares. The
// table holds its strings weakly: a string no object holds any more goes.
func internString(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// maxLabelSets bounds the label sets remembered. Claims and IPAddresses
// repeat a few (one per cluster, or watch filter); objects whose labels are
// all their own gain nothing, and cost at most this many entries.
const maxLabelSets = 256

// labelSets hands out one map for each distinct set of labels.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]map[string]string
}

func (s *labelSets) share(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	key := labelsKey(labels)
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.sets[key]; ok {
		return shared
	}
	if s.sets == nil || len(s.sets) >= maxLabelSets {
		s.sets = make(map[string]map[string]string)
	}
	shared := make(map[string]string, len(labels))
	for k, v := range labels {
		shared[internString(k)] = internString(v)
	}
	s.sets[key] = shared
	return shared
}

// labelsKey is a text that two label sets share if and only if they are
// equal: label keys and values cannot hold a NUL.
func labelsKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}
