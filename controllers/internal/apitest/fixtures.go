package apitest

import (
	"context"
	"errors"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ObjectReader serves whole objects, by kind, namespace and name, as
// metadata or unstructured, and records what was read.
type ObjectReader struct {
	Objects map[string]*unstructured.Unstructured
	Errs    map[string]error
	Gets    []string
}

func (r *ObjectReader) Add(kind, namespace, name string, owners []metav1.OwnerReference, annotations map[string]string, content map[string]any) {
	if r.Objects == nil {
		r.Objects = map[string]*unstructured.Unstructured{}
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
	r.Objects[kind+"/"+namespace+"/"+name] = u
}

func (r *ObjectReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	k := kind + "/" + key.Namespace + "/" + key.Name
	r.Gets = append(r.Gets, k)
	if err := r.Errs[k]; err != nil {
		return err
	}
	u, ok := r.Objects[k]
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

func (r *ObjectReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the MAC lookup must not list")
}

// MachineMACPool is an Infoblox pool of an IPv4 network whose fixed
// addresses carry the machine's MAC.
func MachineMACPool() *v1alpha1.InfobloxIPPool {
	return &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{
		Sources:     []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.0.0.0/24"}}},
		Reservation: v1alpha1.InfobloxReservation{MACAddress: v1alpha1.InfobloxMACMachine},
	}}
}
