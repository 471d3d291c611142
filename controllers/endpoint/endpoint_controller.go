// Package endpoint gives a Cluster that opts in (the annotations of
// api/v1alpha1's ControlPlaneEndpoint*) its control-plane endpoint from a
// pool: it creates one ordinary IPAddressClaim that the Cluster owns, which
// the pool's provider binds as any other, and writes the bound address into
// spec.controlPlaneEndpoint or a topology variable, only where nothing is
// written yet.
package endpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/predicates"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Clusters are read past the cache, which keeps only their metadata and
// spec.paused; the endpoint is patched with an optimistic lock. The
// controller owner reference on the claim blocks the Cluster's foreground
// deletion, which needs update on clusters/finalizers.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusterclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=netboxippools;globalnetboxippools;infobloxippools;globalinfobloxippools,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ClaimSuffix makes the endpoint's claim's name from the Cluster's.
const ClaimSuffix = "-control-plane-endpoint"

// MachineNameSuffix makes, from the Cluster's name, the machine name the
// pools' patterns render the record from (.MachineName): the record of
// Cluster prod is named, for example, prod-api.<zone>.
const MachineNameSuffix = "-api"

// recheckInterval is how soon a Cluster waiting for something no watch
// reports (a pool kind the API server does not serve yet, another
// provider's pool, a ClusterClass or its variable) is looked at again. The
// provider's own pools are watched.
const recheckInterval = time.Minute

// watchedRecheckInterval is how soon a Cluster waiting for what a watch
// reports is looked at again all the same.
const watchedRecheckInterval = 10 * time.Minute

// Reconciler gives opted-in Clusters their control-plane endpoint.
type Reconciler struct {
	// Client writes; its cache serves the watches.
	Client client.Client
	// APIReader reads Clusters whole (the cache strips their spec), and
	// the claim and its IPAddress as just written.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// WatchFilterValue limits reconciliation to Clusters labelled
	// cluster.x-k8s.io/watch-filter=<value>; the claim carries the label.
	WatchFilterValue string
	// Kinds are the provider's pool kinds: a pool of one of them made
	// after a Cluster named it brings that Cluster back at once, and a
	// hand-picked endpoint outside its pool's sources is not claimed.
	Kinds poolkind.Kinds

	poolKinds []schema.GroupVersionKind
	// classes says whether the API server serves ClusterClasses, whose
	// annotations may opt their Clusters in.
	classes bool

	repeats waitRepeats
}

// SetupWithManager watches opted-in Clusters and the claims they own.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	registerMetrics()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplaneendpoint").
		For(&clusterv1.Cluster{}, builder.WithPredicates(
			// A Cluster made from a ClusterClass may be opted in by the
			// class's annotations.
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				c, ok := o.(*clusterv1.Cluster)
				return optedIn(o.GetAnnotations()) || ok && c.Spec.Topology.ClassRef.Name != ""
			}),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue),
			// Status updates change nothing this reconciler reads.
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
				predicate.LabelChangedPredicate{}),
		)).
		// The claim's binding brings its Cluster back.
		Owns(&ipamv1.IPAddressClaim{})
	// A management cluster whose Cluster API serves no ClusterClass (an
	// old or trimmed one) still runs: its Clusters opt in one by one.
	_, err := mgr.GetRESTMapper().RESTMapping(classMetadata().GroupVersionKind().GroupKind(), clusterv1.GroupVersion.Version)
	switch {
	case err == nil:
		r.classes = true
		// An opt-in put on, changed on or taken off a ClusterClass brings
		// its Clusters.
		b = b.WatchesMetadata(classMetadata(), handler.EnqueueRequestsFromMapFunc(r.classToClusters),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc: func(e event.UpdateEvent) bool {
					return !maps.Equal(optInOnly(e.ObjectOld.GetAnnotations()), optInOnly(e.ObjectNew.GetAnnotations()))
				},
				CreateFunc:  func(e event.CreateEvent) bool { return optedIn(e.Object.GetAnnotations()) },
				DeleteFunc:  func(e event.DeleteEvent) bool { return optedIn(e.Object.GetAnnotations()) },
				GenericFunc: func(event.GenericEvent) bool { return false },
			}))
	case meta.IsNoMatchError(err):
		ctrl.LoggerFrom(ctx).Info("The API server serves no ClusterClass: only a Cluster's own annotations opt it in to a control-plane endpoint")
	default:
		return fmt.Errorf("finding ClusterClasses: %w", err)
	}
	for _, kind := range r.Kinds {
		pool := kind.New()
		gvk, err := apiutil.GVKForObject(pool, mgr.GetScheme())
		if err != nil {
			return fmt.Errorf("watching pools: %w", err)
		}
		r.poolKinds = append(r.poolKinds, gvk)
		// A pool created after the Cluster named it: only its creation
		// matters, the claim's own watches follow the pool after that. The
		// pool reconcilers' informers serve this watch too.
		b = b.Watches(pool, handler.EnqueueRequestsFromMapFunc(r.poolToClusters(gvk)),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			}))
	}
	return b.Complete(r)
}

// poolToClusters maps a pool of kind gvk to the opted-in Clusters that name
// it: those of its namespace, or of every namespace for a cluster-scoped
// pool. A Cluster already served is reconciled again, to no effect.
func (r *Reconciler) poolToClusters(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, pool client.Object) []reconcile.Request {
		clusters := &clusterv1.ClusterList{}
		var opts []client.ListOption
		if pool.GetNamespace() != "" {
			opts = append(opts, client.InNamespace(pool.GetNamespace()))
		}
		if err := r.Client.List(ctx, clusters, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the Clusters that may name a new pool")
			return nil
		}
		var out []reconcile.Request
		for i := range clusters.Items {
			annotations, err := r.optInOf(ctx, &clusters.Items[i])
			if err != nil || annotations == nil {
				continue
			}
			opt, err := parseOptIn(annotations)
			if err != nil || opt.pool.APIGroup != gvk.Group || opt.pool.Kind != gvk.Kind || opt.pool.Name != pool.GetName() {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusters.Items[i])})
		}
		return out
	}
}

// Reconcile claims the Cluster's address once, and writes it where the
// opt-in says once it is bound, if that place is empty.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.notOurs(ctx, req) {
		return ctrl.Result{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			// The Cluster is gone, its control plane with it: its claim
			// may let its address go.
			forgetWaiting(req.Namespace, req.Name)
			return ctrl.Result{}, r.letGo(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	if r.WatchFilterValue != "" && cluster.Labels[clusterv1.WatchLabel] != r.WatchFilterValue {
		return ctrl.Result{}, nil
	}
	if !cluster.DeletionTimestamp.IsZero() {
		// Deleting the Cluster releases its VIP. In a background deletion
		// the garbage collector deletes the claim once the Cluster is gone
		// (its finalizer waits for the control plane to go); in a
		// foreground one it deletes the claim first and waits for it.
		forgetWaiting(cluster.Namespace, cluster.Name)
		return ctrl.Result{}, r.letGoOnDeletion(ctx, cluster)
	}
	asked, err := r.optInOf(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if asked == nil {
		// No opt-in (any more): nothing is claimed, but a claim made
		// before still guards the address the Cluster may use.
		forgetWaiting(cluster.Namespace, cluster.Name)
		return ctrl.Result{}, r.protectWithoutOptIn(ctx, cluster)
	}
	log := ctrl.LoggerFrom(ctx)
	if ptr.Deref(cluster.Spec.Paused, false) || annotations.HasPaused(cluster) {
		log.V(4).Info("Cluster is paused, skipping")
		return ctrl.Result{}, nil
	}
	opt, err := parseOptIn(asked)
	if err != nil {
		r.warn(cluster, InvalidControlPlaneEndpointConfigReason, "%v", err)
		return ctrl.Result{}, nil
	}
	if opt.variable != "" && !cluster.Spec.Topology.IsDefined() {
		r.warn(cluster, InvalidControlPlaneEndpointConfigReason,
			"annotation %s names a topology variable, but the Cluster has no spec.topology; drop it to use spec.controlPlaneEndpoint",
			v1alpha1.ControlPlaneEndpointVariableAnnotation)
		return ctrl.Result{}, nil
	}

	claim, err := r.claim(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if claim != nil && !metav1.IsControlledBy(claim, cluster) {
		r.warn(cluster, ControlPlaneEndpointClaimConflictReason,
			"IPAddressClaim %s exists and is not this Cluster's; the provider leaves it alone and claims nothing", claim.Name)
		return ctrl.Result{}, nil
	}
	address, err := r.boundAddress(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	current, set, err := currentValue(cluster, opt)
	if err != nil {
		return ctrl.Result{}, err
	}
	if claim != nil {
		if done, err := r.protect(ctx, cluster, opt, claim, address, current); done || err != nil {
			return ctrl.Result{}, err
		}
	}

	if claim == nil {
		handPicked, isAddress := netip.ParseAddr(current)
		if set && isAddress != nil {
			// A host name: nothing to reserve.
			return ctrl.Result{}, r.reportSet(cluster, opt, claim, address, current)
		}
		if why, err := r.unusable(ctx, cluster, opt); err != nil || why != nil {
			if why != nil {
				r.warn(cluster, why.reason, "%s", why.message)
				if why.watched {
					// The pool's creation brings the Cluster back; the long
					// wait covers an event that is missed.
					return ctrl.Result{RequeueAfter: watchedRecheckInterval}, nil
				}
			}
			return ctrl.Result{RequeueAfter: recheckInterval}, err
		}
		if handPicked.IsValid() {
			outside, err := r.outsidePool(ctx, cluster, opt, handPicked)
			if err != nil || outside {
				if outside {
					r.warn(cluster, ControlPlaneEndpointAlreadySetReason,
						"%s holds %s, which lies outside the sources of %s %s: nothing was reserved, and it is never overwritten",
						placeName(opt), current, opt.pool.Kind, opt.pool.Name)
				}
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.createClaim(ctx, cluster, opt, handPicked)
	}
	if address == "" {
		return r.waiting(cluster, claim), nil
	}
	forgetWaiting(cluster.Namespace, cluster.Name)
	r.repeats.forget(cluster.UID)
	if set {
		return ctrl.Result{}, r.reportSet(cluster, opt, claim, address, current)
	}
	return ctrl.Result{}, r.write(ctx, cluster, opt, address)
}

// notOurs says, from the cache alone, that the Cluster neither opts in nor
// has an endpoint claim: most Clusters of a ClusterClass, which the watch
// admits for their class's sake, are dismissed without a read from the API
// server.
func (r *Reconciler) notOurs(ctx context.Context, req ctrl.Request) bool {
	cached := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached); err != nil || !cached.DeletionTimestamp.IsZero() {
		return false
	}
	if asked, err := r.optInOf(ctx, cached); err != nil || asked != nil {
		return false
	}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name + ClaimSuffix}, &ipamv1.IPAddressClaim{})
	return apierrors.IsNotFound(err)
}

// claim returns the endpoint's claim, nil when there is none.
func (r *Reconciler) claim(ctx context.Context, cluster *clusterv1.Cluster) (*ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name + ClaimSuffix}, claim)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting the endpoint's IPAddressClaim: %w", err)
	}
	return claim, nil
}

// boundAddress is the address of the claim's IPAddress, "" while it has
// none.
func (r *Reconciler) boundAddress(ctx context.Context, claim *ipamv1.IPAddressClaim) (string, error) {
	if claim == nil || claim.Status.AddressRef.Name == "" {
		return "", nil
	}
	address := &ipamv1.IPAddress{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.AddressRef.Name}, address)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("getting the endpoint's IPAddress: %w", err)
	}
	if address.Spec.ClaimRef.Name != claim.Name {
		return "", nil
	}
	return address.Spec.Address, nil
}

// currentValue is what the endpoint's place holds, and whether it holds
// anything at all.
func currentValue(cluster *clusterv1.Cluster, opt optIn) (string, bool, error) {
	if opt.variable == "" {
		return cluster.Spec.ControlPlaneEndpoint.Host, cluster.Spec.ControlPlaneEndpoint.Host != "", nil
	}
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name != opt.variable {
			continue
		}
		var s string
		if err := json.Unmarshal(v.Value.Raw, &s); err != nil {
			// Not a string: set, and not by the provider.
			return string(v.Value.Raw), true, nil
		}
		// An empty string, as templates render an empty setting, is unset.
		return s, s != "", nil
	}
	return "", false, nil
}

// reportSet handles a place that holds a value: the claimed address (done),
// or a value the provider never overwrites, reported. The claim is kept
// whatever it holds: an address the running cluster may use is not the
// provider's to release, the Cluster's deletion releases it.
func (r *Reconciler) reportSet(cluster *clusterv1.Cluster, opt optIn, claim *ipamv1.IPAddressClaim, address, current string) error {
	if address == current {
		return nil
	}
	if claim != nil && address == "" {
		// Bound soon, as after clusterctl move: compared then.
		return nil
	}
	held := "it is not an address, so nothing was reserved"
	if claim != nil {
		held = fmt.Sprintf("IPAddressClaim %s holds %s, reserved until the Cluster is deleted (delete the claim to release it now: the Cluster's endpoint no longer names it)",
			claim.Name, address)
	}
	r.warn(cluster, ControlPlaneEndpointAlreadySetReason, "%s already holds %s; the provider never overwrites it: %s",
		placeName(opt), current, held)
	return nil
}

// failure is why no address may be claimed yet; watched when an event
// will say that it ended.
type failure struct {
	reason, message string
	watched         bool
}

// unusable says why the opt-in cannot be served yet: the pool kind is not
// served or the pool (of this provider's, which it may read) is missing,
// or the ClusterClass lacks the variable.
func (r *Reconciler) unusable(ctx context.Context, cluster *clusterv1.Cluster, opt optIn) (*failure, error) {
	gk := schema.GroupKind{Group: opt.pool.APIGroup, Kind: opt.pool.Kind}
	mapping, err := r.Client.RESTMapper().RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return &failure{reason: ControlPlaneEndpointPoolNotFoundReason,
			message: fmt.Sprintf("the API server serves no pool kind %s: check annotations %s and %s",
				gk, v1alpha1.ControlPlaneEndpointPoolAnnotation, v1alpha1.ControlPlaneEndpointPoolGroupAnnotation)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding pool kind %s: %w", gk, err)
	}
	if gk.Group == v1alpha1.GroupVersion.Group {
		pool := &metav1.PartialObjectMetadata{}
		pool.SetGroupVersionKind(mapping.GroupVersionKind)
		key := client.ObjectKey{Name: opt.pool.Name}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			key.Namespace = cluster.Namespace
		}
		err := r.APIReader.Get(ctx, key, pool)
		if apierrors.IsNotFound(err) {
			return &failure{reason: ControlPlaneEndpointPoolNotFoundReason, message: fmt.Sprintf("%s %s does not exist", opt.pool.Kind, key),
				watched: r.watchesPool(mapping.GroupVersionKind)}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting %s %s: %w", opt.pool.Kind, key, err)
		}
	}
	if opt.variable == "" {
		return nil, nil
	}
	ref := cluster.Spec.Topology.ClassRef
	class := &clusterv1.ClusterClass{}
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = cluster.Namespace
	}
	err = r.APIReader.Get(ctx, key, class)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return &failure{reason: ControlPlaneEndpointVariableUndefinedReason,
			message: fmt.Sprintf("ClusterClass %s does not exist, so variable %s is not known", key, opt.variable)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting ClusterClass %s: %w", key, err)
	}
	if !definesVariable(class, opt.variable) {
		return &failure{reason: ControlPlaneEndpointVariableUndefinedReason,
			message: fmt.Sprintf("ClusterClass %s defines no variable %s", key, opt.variable)}, nil
	}
	return nil, nil
}

// watchesPool says whether pools of gvk are watched.
func (r *Reconciler) watchesPool(gvk schema.GroupVersionKind) bool {
	return slices.Contains(r.poolKinds, gvk)
}

// definesVariable says whether the ClusterClass defines the variable: in
// its spec, or in its status, which also lists the variables of its
// external patches.
func definesVariable(class *clusterv1.ClusterClass, name string) bool {
	for _, v := range class.Spec.Variables {
		if v.Name == name {
			return true
		}
	}
	for _, v := range class.Status.Variables {
		if v.Name == name {
			return true
		}
	}
	return false
}

// createClaim creates the endpoint's claim: owned by the Cluster, so that
// clusterctl move carries it and the garbage collector deletes it after
// the Cluster; in the Cluster, so that it pauses with it; with the machine
// name the pool's patterns name the record from.
func (r *Reconciler) createClaim(ctx context.Context, cluster *clusterv1.Cluster, opt optIn, handPicked netip.Addr) error {
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cluster.Namespace,
			Name:        cluster.Name + ClaimSuffix,
			Labels:      map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			Annotations: map[string]string{v1alpha1.MachineNameAnnotation: cluster.Name + MachineNameSuffix},
			// The address stays reserved while the Cluster uses it (protect).
			Finalizers: []string{v1alpha1.KeepAddressFinalizer},
		},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: cluster.Name, PoolRef: opt.pool},
	}
	if handPicked.IsValid() {
		// A VIP picked by hand: the pool reserves exactly it, or none and
		// says why, so that no machine is ever given it.
		claim.Annotations[v1alpha1.RequestedAddressAnnotation] = handPicked.String()
	}
	if v, ok := cluster.Labels[clusterv1.WatchLabel]; ok {
		claim.Labels[clusterv1.WatchLabel] = v
	}
	if err := controllerutil.SetControllerReference(cluster, claim, r.Client.Scheme()); err != nil {
		return fmt.Errorf("owning the endpoint's claim: %w", err)
	}
	if err := r.Client.Create(ctx, claim); err != nil {
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// Another reconcile made it, or the namespace is going.
			return nil
		}
		return fmt.Errorf("creating the endpoint's IPAddressClaim: %w", err)
	}
	if handPicked.IsValid() {
		r.Recorder.Eventf(cluster, claim, corev1.EventTypeNormal, ControlPlaneEndpointClaimedReason, "ClaimEndpoint",
			"Reserving the control-plane endpoint %s, set by hand, in %s %s with IPAddressClaim %s", handPicked, opt.pool.Kind, opt.pool.Name, claim.Name)
		return nil
	}
	r.Recorder.Eventf(cluster, claim, corev1.EventTypeNormal, ControlPlaneEndpointClaimedReason, "ClaimEndpoint",
		"Claimed the control-plane endpoint from %s %s with IPAddressClaim %s", opt.pool.Kind, opt.pool.Name, claim.Name)
	return nil
}

// write puts the address into the empty place, with an optimistic lock so
// that a value written meanwhile (by a user, or CAPI from the infrastructure
// cluster) is never overwritten.
func (r *Reconciler) write(ctx context.Context, cluster *clusterv1.Cluster, opt optIn, address string) error {
	before := cluster.DeepCopy()
	if opt.variable == "" {
		cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: address, Port: opt.port}
	} else {
		raw, err := json.Marshal(address)
		if err != nil {
			return fmt.Errorf("encoding the address: %w", err)
		}
		value := clusterv1.ClusterVariable{Name: opt.variable, Value: apiextensionsv1.JSON{Raw: raw}}
		if i := slices.IndexFunc(cluster.Spec.Topology.Variables, func(v clusterv1.ClusterVariable) bool { return v.Name == opt.variable }); i >= 0 {
			// Present but empty.
			cluster.Spec.Topology.Variables[i] = value
		} else {
			cluster.Spec.Topology.Variables = append(cluster.Spec.Topology.Variables, value)
		}
	}
	if err := r.Client.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing the control-plane endpoint: %w", err)
	}
	r.Recorder.Eventf(cluster, nil, corev1.EventTypeNormal, ControlPlaneEndpointSetReason, "SetEndpoint",
		"Wrote %s into %s", address, placeName(opt))
	return nil
}

func placeName(opt optIn) string {
	if opt.variable != "" {
		return "topology variable " + opt.variable
	}
	return "spec.controlPlaneEndpoint.host"
}

func (r *Reconciler) warn(cluster *clusterv1.Cluster, reason, format string, args ...any) {
	r.Recorder.Eventf(cluster, nil, corev1.EventTypeWarning, reason, "ClaimEndpoint", format, args...)
}
