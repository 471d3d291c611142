package release

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/util/contract"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// peerProvider is one entry of testdata/peer-crds.yaml.
type peerProvider struct {
	Provider string   `json:"provider"`
	Group    string   `json:"group"`
	Versions []string `json:"versions"`
	Kinds    []struct {
		Kind   string `json:"kind"`
		Plural string `json:"plural"`
		Scope  string `json:"scope"`
	} `json:"kinds"`
}

func peerCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "peer-crds.yaml"))
	require.NoError(t, err)
	var peers []peerProvider
	require.NoError(t, yaml.UnmarshalStrict(raw, &peers))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range peers {
		for _, k := range p.Kinds {
			crd := &apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: k.Plural + "." + p.Group, Annotations: map[string]string{"test/provider": p.Provider}},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Group: p.Group,
					Names: apiextensionsv1.CustomResourceDefinitionNames{
						Kind: k.Kind, ListKind: k.Kind + "List", Plural: k.Plural, Singular: strings.ToLower(k.Kind),
					},
					Scope: apiextensionsv1.ResourceScope(k.Scope),
				},
			}
			for i, v := range p.Versions {
				crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
					Name: v, Served: true, Storage: i == len(p.Versions)-1,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
				})
			}
			crds = append(crds, crd)
		}
	}
	return crds
}

// TestInstallsBesideThePeers installs the released components with
// clusterctl onto an API server that already serves the CRDs of the other
// IPAM providers (in-cluster, telekom's Infoblox, the NetBox providers,
// Metal3, Nutanix). No CRD name of ours equals one of theirs; afterwards
// both sets serve objects, and no CRD of the peers was changed.
func TestInstallsBesideThePeers(t *testing.T) {
	// An API server of its own, so that the peers' CRDs are there before
	// ours, whatever other tests installed.
	e, cfg, err := newAPIServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop() })
	k8s := adminClient(t, cfg)
	ctx := context.Background()

	peers := peerCRDs(t)
	before := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range peers {
		require.NoError(t, k8s.Create(ctx, crd), "creating the peer CRD %s", crd.Name)
	}
	for _, crd := range peers {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(c, k8s.Get(ctx, client.ObjectKeyFromObject(crd), got))
			assert.True(c, established(got), "%s is not established", crd.Name)
			before[crd.Name] = got
		}, 30*time.Second, 100*time.Millisecond)
	}

	comps := render(t, repository(t), nil, "")
	ours := map[string]bool{}
	for _, o := range comps.Objs() {
		if o.GetKind() == "CustomResourceDefinition" {
			ours[o.GetName()] = true
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			assert.Equal(t, v1alpha1.GroupVersion.Group, group, "%s", o.GetName())
			assert.Equal(t, contract.CalculateCRDName(group, kind), o.GetName(), "the contract's CRD name")
			assert.NotContains(t, before, o.GetName(), "our CRD %s has the name of a peer's", o.GetName())
		}
	}
	require.Len(t, ours, 4)
	applyComponents(t, k8s, comps.Objs())

	t.Run("no CRD of the peers changed", func(t *testing.T) {
		for name, was := range before {
			now := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, now))
			assert.Equal(t, was.ResourceVersion, now.ResourceVersion, "%s was written", name)
			assert.Equal(t, was.Spec, now.Spec, "%s changed", name)
		}
	})

	t.Run("both sets serve", func(t *testing.T) {
		ns := "peers"
		require.NoError(t, k8s.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
		}}))
		var crds []*apiextensionsv1.CustomResourceDefinition
		crds = append(crds, peers...)
		for name := range ours {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, crd))
			crds = append(crds, crd)
		}
		for _, crd := range crds {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storageVersion(crd), Kind: crd.Spec.Names.Kind}
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(gvk)
			o.SetName("beside")
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				o.SetNamespace(ns)
			}
			// Our pools need a valid spec; the peers' open schema takes any.
			if crd.Spec.Group == v1alpha1.GroupVersion.Group {
				setMinimalPoolSpec(t, o)
			}
			require.NoError(t, k8s.Create(ctx, o), "creating a %s", gvk)
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(crd.Spec.Names.ListKind))
			require.NoError(t, k8s.List(ctx, list))
			assert.Len(t, list.Items, 1, "%s", gvk)
		}
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

// setMinimalPoolSpec gives one of our pools the least spec its CRD accepts.
func setMinimalPoolSpec(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	var spec map[string]any
	switch strings.TrimPrefix(o.GetKind(), "Global") {
	case "NetboxIPPool":
		spec = map[string]any{
			"connection": map[string]any{"url": "https://netbox.example.com", "credentialsSecretRef": map[string]any{"name": "netbox"}},
			"sources":    []any{map[string]any{"prefix": map[string]any{"cidr": "10.0.0.0/24"}}},
		}
	case "InfobloxIPPool":
		spec = map[string]any{
			"connection": map[string]any{"host": "gm.example.com", "credentialsSecretRef": map[string]any{"name": "infoblox"}},
			"sources":    []any{map[string]any{"network": map[string]any{"cidr": "10.0.0.0/24"}}},
		}
	default:
		t.Fatalf("unknown pool kind %s", o.GetKind())
	}
	require.NoError(t, unstructured.SetNestedField(o.Object, spec, "spec"))
}
