package macaddress

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// DHCP reservations with the machine's MAC: an Infoblox pool with
// spec.reservation.macAddress Machine gives each new fixed address the MAC
// of the machine's interface the claim serves, found through the owner
// chain that names the claim's Machine:
//   - Metal3: IPAddressClaim → Metal3Data → Metal3Machine (directly or via
//     the Metal3DataClaim), whose annotation metal3.io/BareMetalHost names
//     the host; the MAC is the BareMetalHost's spec.bootMACAddress.
//   - CAPV: IPAddressClaim → VSphereVM; CAPV names the claim
//     <vm>-<device index>-<pool index>, and the MAC is the device's
//     spec.network.devices[i].macAddr. A MAC that vSphere generates is of
//     no use before binding: CAPV (1.16) clones the VM, then waits for the
//     claims, and writes the NICs' MACs (status.network[i].macAddr) only
//     once the VM is ready, which needs the addresses. Such a claim is
//     reserved without a MAC (MACAddressDeferred event and condition)
//     instead of waiting for ever, and the MAC is written into the record
//     once status.network[i].macAddr reports it (see Await).
//
// The MAC is read when the claim is first reserved and recorded in the
// claim's annotation ipam-bridge.github.io/mac-address; until it is known
// the claim waits (MACAddressUnknown), woken by a metadata-only watch on
// the kind the MAC comes from, started when a claim first needs it
// (kindWatches). A MAC that changes afterwards is reported
// on the bound claim (MACAddressCurrent False, MACAddressChanged) and never
// written to the grid: the record the IPAM team sees is the one they
// reviewed.

// Reading the MAC: the BareMetalHost's and the VSphereVM's whole object is
// fetched by get (the API serves no single field), of which one field is
// read; list and watch serve the metadata-only informers that wake waiting
// claims.
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=vspherevms,verbs=get;list;watch

var (
	BareMetalHostKind = schema.GroupKind{Group: "metal3.io", Kind: "BareMetalHost"}
	VSphereVMKind     = schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereVM"}
	metal3MachineKind = schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine"}
)

const (
	// BareMetalHostAnnotation on a Metal3Machine names its host as
	// "<namespace>/<name>" (CAPM3's baremetal.HostAnnotation).
	BareMetalHostAnnotation = "metal3.io/BareMetalHost"
	// bareMetalHostVersion is the version BareMetalHosts are read in.
	bareMetalHostVersion = "v1alpha1"
)

// Source is the object a claim's MAC is read from.
type Source struct {
	Kind schema.GroupKind
	types.NamespacedName
}

func (s Source) String() string { return s.Kind.Kind + " " + s.NamespacedName.String() }

// Key is the source as the claim's MACAddressSourceAnnotation records it:
// "<Kind>.<group>/<namespace>/<name>".
func (s Source) Key() string { return s.Kind.String() + "/" + s.Namespace + "/" + s.Name }

// ParseSource reads a MACAddressSourceAnnotation value.
func ParseSource(v string) (Source, bool) {
	gk, rest, ok := strings.Cut(v, "/")
	if !ok {
		return Source{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	kind := schema.ParseGroupKind(gk)
	if !ok || name == "" || kind.Kind == "" {
		return Source{}, false
	}
	return Source{Kind: kind, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, true
}

// Found is what a claim's owner chain says of its MAC.
type Found struct {
	// MAC, lower case with colons; "" when it is not known (yet), or the
	// claim has no machine interface (Source is zero).
	MAC string
	// Source is the object the MAC is, or will be, read from.
	Source Source
	// Unknown says why the MAC is not known yet: the claim waits.
	Unknown string
	// Deferred says why the MAC cannot be known before the claim is bound:
	// the claim is reserved without one.
	Deferred string
}

// Sources finds the MAC of the machine's interface a claim's address
// is for, and remembers which claims wait for or hold the MAC of which
// object, to wake them when it changes.
type Sources struct {
	// Reader reads past the cache: the objects read are few per claim, and
	// a cache would hold every BareMetalHost and VSphereVM whole.
	Reader client.Reader
	// Follow are the kinds whose owners are followed (consumerOwnerKinds).
	Follow []schema.GroupKind

	mu       sync.Mutex
	watchers map[Source]sets.Set[types.NamespacedName]
	sources  map[types.NamespacedName]Source
	// due are the bound claims whose source changed since their MAC was
	// last compared.
	due sets.Set[types.NamespacedName]
	// Watches starts the watch on a source kind when a claim first reads
	// a MAC from it; nil starts none (tests).
	Watches *kindWatches
	// deferred are the claims told that they are reserved without a MAC.
	deferred sets.Set[types.NamespacedName]
	// awaiting are the bound claims whose MAC is written into their record
	// once their machine reports it (see Await).
	awaiting sets.Set[types.NamespacedName]
}

// Normalize parses a 48-bit MAC in any of the usual notations and
// writes it as NIOS stores it: lower case, with colons.
func Normalize(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not a 48-bit MAC address", s)
	}
	return hw.String(), nil
}

// Lookup finds the claim's MAC through its owner chain. A claim that no
// Metal3 or CAPV machine owns gets a zero machineMAC.
func (m *Sources) Lookup(ctx context.Context, claim *ipamv1.IPAddressClaim) (Found, error) {
	isVM := func(ref metav1.OwnerReference) bool { return refKind(ref) == VSphereVMKind }
	if vm, _ := owners.FindOwner(ctx, m.Reader, nil, claim.Namespace, claim.OwnerReferences, 0, nil, isVM); vm != nil {
		return m.fromVSphereVM(ctx, claim, *vm)
	}
	isM3M := func(ref metav1.OwnerReference) bool { return refKind(ref) == metal3MachineKind }
	m3m, err := owners.FindOwner(ctx, m.Reader, m.Follow, claim.Namespace, claim.OwnerReferences, owners.MaxOwnerHops, map[string]bool{}, isM3M)
	if err != nil || m3m == nil {
		return Found{}, err
	}
	return m.fromMetal3Machine(ctx, claim.Namespace, *m3m)
}

func refKind(ref metav1.OwnerReference) schema.GroupKind {
	return schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
}

// fromVSphereVM reads the MAC of the VSphereVM's network device the claim
// serves, which CAPV's claim name <vm>-<device>-<pool> gives.
func (m *Sources) fromVSphereVM(ctx context.Context, claim *ipamv1.IPAddressClaim, ref metav1.OwnerReference) (Found, error) {
	device, ok := capvDevice(claim.Name, ref.Name)
	if !ok {
		// Not a claim CAPV made for a device: no interface to read.
		ctrl.LoggerFrom(ctx).V(2).Info("The claim's name is not <VSphereVM>-<device>-<pool>, no MAC to read", "VSphereVM", ref.Name)
		return Found{}, nil
	}
	src := Source{Kind: VSphereVMKind, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: ref.Name}}
	vm, why, err := m.read(ctx, src, ref.APIVersion, ref.UID)
	if err != nil || vm == nil {
		return Found{Source: src, Unknown: why}, err
	}
	where := fmt.Sprintf("spec.network.devices[%d].macAddr", device)
	if mac := nestedListField(vm.Object, device, "macAddr", "spec", "network", "devices"); mac != "" {
		return macFrom(src, where, mac)
	}
	status := fmt.Sprintf("status.network[%d].macAddr", device)
	if mac := nestedListField(vm.Object, device, "macAddr", "status", "network"); mac != "" {
		return macFrom(src, status, mac)
	}
	return Found{Source: src, Deferred: fmt.Sprintf("%s sets no %s, and CAPV reports the MAC vSphere gives the device (%s) only once the VM is ready, "+
		"which needs this address", src, where, status)}, nil
}

// fromMetal3Machine reads the bootMACAddress of the BareMetalHost the
// Metal3Machine names.
func (m *Sources) fromMetal3Machine(ctx context.Context, namespace string, ref metav1.OwnerReference) (Found, error) {
	m3mSrc := Source{Kind: metal3MachineKind, NamespacedName: types.NamespacedName{Namespace: namespace, Name: ref.Name}}
	m3m := &metav1.PartialObjectMetadata{}
	m3m.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	if why, err := m.get(ctx, m3mSrc, ref.UID, m3m); err != nil || why != "" {
		return Found{Unknown: why}, err
	}
	host := m3m.Annotations[BareMetalHostAnnotation]
	hostNS, hostName, ok := strings.Cut(host, "/")
	if !ok || hostNS == "" || hostName == "" {
		// CAPM3 names the host before it makes the Metal3DataClaim, so
		// this is rare; the claim's capped backoff looks again.
		return Found{Unknown: fmt.Sprintf("%s names no BareMetalHost in its annotation %s", m3mSrc, BareMetalHostAnnotation)}, nil
	}
	src := Source{Kind: BareMetalHostKind, NamespacedName: types.NamespacedName{Namespace: hostNS, Name: hostName}}
	bmh, why, err := m.read(ctx, src, BareMetalHostKind.WithVersion(bareMetalHostVersion).GroupVersion().String(), "")
	if err != nil || bmh == nil {
		return Found{Source: src, Unknown: why}, err
	}
	mac, _, _ := unstructured.NestedString(bmh.Object, "spec", "bootMACAddress")
	return macFrom(src, "spec.bootMACAddress", mac)
}

// read gets the source object whole; nil and why when it cannot be read.
func (m *Sources) read(ctx context.Context, src Source, apiVersion string, uid types.UID) (*unstructured.Unstructured, string, error) {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(src.Kind.Kind)
	why, err := m.get(ctx, src, uid, obj)
	if err != nil || why != "" {
		return nil, why, err
	}
	return obj, "", nil
}

// get reads obj, and says why not where the object is not there to read:
// gone, a namesake of the one owning the chain, of a kind not served, or
// one the manager may not read.
func (m *Sources) get(ctx context.Context, src Source, uid types.UID, obj client.Object) (string, error) {
	err := m.Reader.Get(ctx, src.NamespacedName, obj)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s not found", src), nil
	case apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
		return fmt.Sprintf("%s cannot be read: %v", src, err), nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", src, err)
	case uid != "" && obj.GetUID() != uid:
		return fmt.Sprintf("%s is not the one that owns the claim (UID %s)", src, obj.GetUID()), nil
	}
	return "", nil
}

func macFrom(src Source, where, value string) (Found, error) {
	if value == "" {
		return Found{Source: src, Unknown: fmt.Sprintf("%s has no %s yet", src, where)}, nil
	}
	mac, err := Normalize(value)
	if err != nil {
		return Found{Source: src, Unknown: fmt.Sprintf("%s %s: %v", src, where, err)}, nil
	}
	return Found{MAC: mac, Source: src}, nil
}

// capvDevice parses the device index from a claim CAPV named
// <vm>-<device>-<pool>.
func capvDevice(claimName, vmName string) (int, bool) {
	rest, ok := strings.CutPrefix(claimName, vmName+"-")
	if !ok {
		return 0, false
	}
	device, pool, ok := strings.Cut(rest, "-")
	d, errD := strconv.Atoi(device)
	_, errP := strconv.Atoi(pool)
	return d, ok && errD == nil && errP == nil && d >= 0
}

// nestedListField is obj's fields...[index][field] as a string, "" if any
// part is missing.
func nestedListField(obj map[string]any, index int, field string, fields ...string) string {
	list, _, _ := unstructured.NestedSlice(obj, fields...)
	if index >= len(list) {
		return ""
	}
	item, _ := list[index].(map[string]any)
	s, _ := item[field].(string)
	return s
}

// Watch remembers that the claim's MAC comes from src, and makes sure the
// kind of src is watched.
func (m *Sources) Watch(src Source, claim types.NamespacedName) {
	m.remember(src, claim)
	m.Watches.ensure(src.Kind)
}

func (m *Sources) remember(src Source, claim types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchers == nil {
		m.watchers, m.sources = map[Source]sets.Set[types.NamespacedName]{}, map[types.NamespacedName]Source{}
	}
	if old, ok := m.sources[claim]; ok && old != src {
		m.watchers[old].Delete(claim)
	}
	if m.watchers[src] == nil {
		m.watchers[src] = sets.New[types.NamespacedName]()
	}
	m.watchers[src].Insert(claim)
	m.sources[claim] = src
}

// TakeDue says whether the claim's source changed since its MAC was last
// compared, and clears that.
func (m *Sources) TakeDue(claim types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.due.Has(claim) {
		return false
	}
	m.due.Delete(claim)
	return true
}

// Refused handles the grid's refusal of the claim's MAC, which another
// fixed address holds (MACAddressInUse), and says what the claim's message
// adds. A MAC the provider read from the machine (the source annotation
// says so) is dropped with its source, so that the next attempt reads the
// machine's MAC again: a corrected MAC then makes the record. A MAC set by
// hand stays, for whoever set it to correct. Either way the caller holds
// the claim back for its wait with the annotations as Refused leaves them:
// dropping them writes the claim, and that write's event must not bring on
// another attempt at once (a lookup, the annotations written again and
// another refusal, in a loop). A correction of a hand-set MAC, or a change
// of the object the MAC is read from (see MapClaims), ends the hold.
func (m *Sources) Refused(claim *ipamv1.IPAddressClaim) string {
	if m == nil {
		return ""
	}
	key := client.ObjectKeyFromObject(claim)
	sourceKey, provided := claim.Annotations[v1alpha1.MACAddressSourceAnnotation]
	if !provided {
		if _, ok := claim.Annotations[v1alpha1.MACAddressAnnotation]; !ok {
			return ""
		}
		return fmt.Sprintf("the MAC is the one the claim's annotation %s sets: correct it there if it is wrong", v1alpha1.MACAddressAnnotation)
	}
	delete(claim.Annotations, v1alpha1.MACAddressAnnotation)
	delete(claim.Annotations, v1alpha1.MACAddressSourceAnnotation)
	from := "the machine"
	if src, ok := ParseSource(sourceKey); ok {
		// Woken when it changes, as when the MAC was first awaited.
		m.Watch(src, key)
		from = src.String()
	}
	return fmt.Sprintf("the MAC was read from %s, and is read again at the claim's next attempt: correct it there if it is wrong", from)
}

// FirstDeferral says whether the claim is told for the first time that
// it is reserved without a MAC: the reservation may be tried several
// times (a busy or full pool, a failed answer), and the event says the
// same each time.
func (m *Sources) FirstDeferral(claim types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deferred.Has(claim) {
		return false
	}
	if m.deferred == nil {
		m.deferred = sets.New[types.NamespacedName]()
	}
	m.deferred.Insert(claim)
	return true
}

// Forget drops a claim that is gone.
func (m *Sources) Forget(claim types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deferred.Delete(claim)
	m.awaiting.Delete(claim)
	src, ok := m.sources[claim]
	if !ok {
		return
	}
	delete(m.sources, claim)
	m.due.Delete(claim)
	if m.watchers[src].Delete(claim).Len() == 0 {
		delete(m.watchers, src)
	}
}

// MapClaims maps an object of a source kind to the claims whose MAC it
// holds. changed, when not nil, says the object changed: the claims are
// marked due for a comparison, and told (a refused MAC may have been
// corrected, so a claim held back looks at once).
func (m *Sources) MapClaims(kind schema.GroupKind, changed func(claim types.NamespacedName)) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		m.mu.Lock()
		defer m.mu.Unlock()
		var reqs []reconcile.Request
		for claim := range m.watchers[Source{Kind: kind, NamespacedName: client.ObjectKeyFromObject(o)}] {
			if changed != nil {
				if m.due == nil {
					m.due = sets.New[types.NamespacedName]()
				}
				m.due.Insert(claim)
				changed(claim)
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: claim})
		}
		return reqs
	}
}

// SourceEvents wakes the claims whose MAC an object of kind holds. The
// watch's first listing, at a restart or when the watch starts late, only
// wakes them (a claim waiting for a MAC looks again): the objects listed
// did not change, so the bound claims, which by then are watchers, are not
// marked due, and a restart reads no owner chain past the cache. A change
// is told to woken, for each claim.
func (m *Sources) SourceEvents(kind schema.GroupKind, woken func(claim types.NamespacedName)) handler.EventHandler {
	changed, listed := m.MapClaims(kind, woken), m.MapClaims(kind, nil)
	enqueue := func(reqs []reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.IsInInitialList {
				enqueue(listed(ctx, e.Object), q)
				return
			}
			enqueue(changed(ctx, e.Object), q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(changed(ctx, e.ObjectNew), q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(changed(ctx, e.Object), q)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(changed(ctx, e.Object), q)
		},
	}
}

// SourceChanged lets through the events of a source object that may
// change a claim's MAC: its creation, its deletion, and a new generation,
// which the API server gives a BareMetalHost or a VSphereVM when its spec
// changes. The MAC is spec: a host's bootMACAddress, a device's macAddr.
// A VSphereVM's status.network[i].macAddr, vSphere's MAC for a device
// without one, is a fallback read when a claim is reserved or compared;
// vSphere keeps a device's MAC, so the status changes no claim waits for.
// Without the predicate every status update (provisioning and power
// states, addresses) and every metadata change (annotations, labels,
// finalizers) would mark the bound claims of the object due, each of
// which would then read its owner chain past the cache.
func SourceChanged() predicate.Predicate {
	// Create, delete and generic events pass: only updates are judged.
	return predicate.GenerationChangedPredicate{}
}

// kindWatches starts the metadata-only watch on a source kind the first
// time a claim needs it: when a claim of a pool that wants the machine's
// MAC reads its MAC from an object of that kind, or is bound with one read
// from it. Until then no informer holds the metadata of every BareMetalHost
// or VSphereVM in the cluster, and a management cluster whose pools never
// opt in watches neither. A kind the API server does not serve (yet) is not
// watched; a later need tries again, at most every kindWatchRetry, and
// the claims that wait for a MAC from it look again after their capped
// backoff meanwhile. The informer's first listing brings every claim that
// reads an object of the kind back once, so a MAC that appeared between a
// claim's look and the watch's start is not missed.
type kindWatches struct {
	// start starts the watch on kind.
	start func(kind schema.GroupKind) error
	log   logr.Logger
	now   func() time.Time

	mu      sync.Mutex
	started map[schema.GroupKind]bool
	// failed is when a kind's start last failed.
	failed map[schema.GroupKind]time.Time
}

// kindWatchRetry is the least time between two attempts to watch a kind
// the API server did not serve: each asks its discovery.
const kindWatchRetry = 10 * time.Second

func NewKindWatches(log logr.Logger, start func(kind schema.GroupKind) error) *kindWatches {
	return &kindWatches{start: start, log: log, now: time.Now,
		started: map[schema.GroupKind]bool{}, failed: map[schema.GroupKind]time.Time{}}
}

// ensure starts the watch on kind unless it runs, or failed moments ago.
func (w *kindWatches) ensure(kind schema.GroupKind) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started[kind] {
		return
	}
	if at, ok := w.failed[kind]; ok && w.now().Sub(at) < kindWatchRetry {
		return
	}
	if err := w.start(kind); err != nil {
		w.failed[kind] = w.now()
		w.log.Info("Not watching a kind MACs are read from; claims waiting for a MAC from it look again after their backoff",
			"kind", kind.String(), "reason", err.Error())
		return
	}
	delete(w.failed, kind)
	w.started[kind] = true
	w.log.Info("Watching a kind MACs are read from, which a pool's claims now need", "kind", kind.String())
}

// Recorded is the MAC the claim's record carries, for a pool whose records
// carry the machine's MAC; "" otherwise.
func Recorded(claim *ipamv1.IPAddressClaim, kind poolkind.Kind, pool poolkind.Pool) string {
	if !kind.WantsMachineMAC(pool) {
		return ""
	}
	mac, err := Normalize(claim.Annotations[v1alpha1.MACAddressAnnotation])
	if err != nil {
		return ""
	}
	return mac
}
