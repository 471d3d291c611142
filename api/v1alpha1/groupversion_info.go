// Package v1alpha1 contains the pool types of the Cluster API IPAM bridge provider.
// +kubebuilder:object:generate=true
// +groupName=ipam-bridge.github.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the pool types.
	GroupVersion = schema.GroupVersion{Group: "ipam-bridge.github.io", Version: "v1alpha1"}

	// SchemeBuilder registers the pool types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the pool types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
