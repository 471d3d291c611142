package pool

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// The manager may patch Secrets only to add or remove this finalizer: the
// ValidatingAdmissionPolicy in config/rbac refuses any other change it makes.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=patch

// SecretReconciler keeps a credentials Secret while any pool uses it, with
// the CredentialsInUseFinalizer. Deleting a namespace deletes its Secret,
// pools and claims at once; without the finalizer the Secret could go first,
// and no claim could then be released, so the namespace would never finish.
// The finalizer lives in the API server, so it survives a manager restart.
type SecretReconciler struct {
	Client client.Client
	// APIReader reads a Secret the cache does not hold: the cache holds
	// only labelled Secrets, and one whose label was removed may still
	// carry the finalizer.
	APIReader client.Reader
	// Kinds are every pool kind: a Secret is in use while a pool of any
	// kind, served by any manager, names it.
	Kinds            poolkind.Kinds
	ManagerNamespace string
}

// SetupWithManager watches labelled Secrets (metadata only; the manager's
// cache holds no other, see cachetransform.CacheOptions) and every pool
// kind, mapping a pool to the Secret it names now and the one it named
// before an edit. A Secret whose label is removed leaves the cache, which
// the watch sees as its deletion.
func (r *SecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("credentials-secret").
		For(backendcache.SecretMetadata(), builder.OnlyMetadata, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.CredentialsLabel] == "true" || controllerutil.ContainsFinalizer(o, v1alpha1.CredentialsInUseFinalizer)
		})))
	for _, kind := range r.Kinds {
		b = b.Watches(kind.New(), r.poolToSecrets(kind))
	}
	return b.Complete(r)
}

// Reconcile adds the finalizer while a pool names the Secret and removes it
// once none does.
func (r *SecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	secret := backendcache.SecretMetadata()
	err := r.Client.Get(ctx, req.NamespacedName, secret)
	if apierrors.IsNotFound(err) {
		// Not labelled (or gone): it may still carry the finalizer, from
		// before its label was removed.
		secret = backendcache.SecretMetadata()
		err = r.APIReader.Get(ctx, req.NamespacedName, secret)
		if err == nil && !controllerutil.ContainsFinalizer(secret, v1alpha1.CredentialsInUseFinalizer) {
			return ctrl.Result{}, nil
		}
	}
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	users, err := r.poolsUsing(ctx, secret)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := secret.DeepCopy()
	changed := false
	switch {
	case users > 0 && secret.GetLabels()[v1alpha1.CredentialsLabel] == "true":
		changed = controllerutil.AddFinalizer(secret, v1alpha1.CredentialsInUseFinalizer)
	case users == 0:
		changed = controllerutil.RemoveFinalizer(secret, v1alpha1.CredentialsInUseFinalizer)
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Patch(ctx, secret, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Updated the credentials finalizer", "pools", users)
	return ctrl.Result{}, nil
}

// poolsUsing counts the pools, of every kind and being deleted or not, that
// read their credentials from the Secret.
func (r *SecretReconciler) poolsUsing(ctx context.Context, secret client.Object) (int, error) {
	n := 0
	for _, kind := range r.Kinds {
		if !kind.Namespaced && secret.GetNamespace() != r.ManagerNamespace {
			continue
		}
		pools := kind.NewList()
		opts := []client.ListOption{client.MatchingFields{index.SecretNameField: secret.GetName()}}
		if kind.Namespaced {
			opts = append(opts, client.InNamespace(secret.GetNamespace()))
		}
		if err := r.Client.List(ctx, pools, opts...); err != nil {
			return 0, fmt.Errorf("listing %s: %w", kind.Kind, err)
		}
		n += meta.LenList(pools)
	}
	return n, nil
}

// poolToSecrets enqueues the Secret a pool names, and on an edit the one it
// named before, which may no longer be in use.
func (r *SecretReconciler) poolToSecrets(kind poolkind.Kind) handler.EventHandler {
	key := func(o client.Object) reconcile.Request {
		ns := r.ManagerNamespace
		if kind.Namespaced {
			ns = o.GetNamespace()
		}
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: kind.SecretName(o.(poolkind.Pool))}}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { q.Add(key(e.Object)) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			q.Add(key(e.ObjectOld))
			q.Add(key(e.ObjectNew))
		},
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { q.Add(key(e.Object)) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { q.Add(key(e.Object)) },
	}
}
