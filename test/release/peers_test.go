package release

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
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
// both sets serve objects, and kubectl resolves the plurals both serve
// (netboxippools, …) as docs/install.md tells users.
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
	require.Len(t, ours, 5)
	applyComponents(t, k8s, comps.Objs())

	t.Run("kubectl tells them apart", func(t *testing.T) {
		// The overlap a user meets is not the CRD names (ours differ, as
		// asserted above) but the plurals and kinds that two groups serve:
		// kubectl resolves a bare plural to one group only. Resolved as
		// kubectl resolves it (discovery, priority by group, shortcuts).
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		require.NoError(t, err)
		cached := memory.NewMemCacheClient(dc)
		mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
		peerGroup := map[string]string{}
		for _, crd := range peers {
			peerGroup[crd.Spec.Names.Plural] = crd.Spec.Group
		}
		var shared []string
		for name := range ours {
			plural, _, _ := strings.Cut(name, ".")
			if _, ok := peerGroup[plural]; ok {
				shared = append(shared, plural)
			}
		}
		sort.Strings(shared)
		require.ElementsMatch(t, []string{"globalnetboxippools", "infobloxippools", "netboxippools"}, shared,
			"the plurals a peer serves too, which docs/install.md lists")
		for _, plural := range shared {
			t.Run(plural, func(t *testing.T) {
				all, err := mapper.ResourcesFor(schema.GroupVersionResource{Resource: plural})
				require.NoError(t, err)
				var groups []string
				for _, gvr := range all {
					groups = append(groups, gvr.Group)
				}
				assert.Contains(t, groups, v1alpha1.GroupVersion.Group, "%s of ours is served", plural)
				assert.Contains(t, groups, peerGroup[plural], "%s of the peer's is served", plural)

				// "kubectl get <plural>" picks one group, without a word:
				// the one discovery lists first. docs/install.md says which.
				bare, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: plural})
				require.NoError(t, err)
				assert.Equal(t, v1alpha1.GroupVersion.Group, bare.Group,
					"kubectl get %s resolves to %s; docs/install.md says ours (ipam-bridge.github.io sorts before ipam.cluster.x-k8s.io)", plural, bare.Group)

				// "kubectl get <plural>.<group>" reaches each: kubectl reads
				// the argument as plural.version.group first, then as
				// plural.group (its resource builder's mappingFor).
				for _, group := range []string{v1alpha1.GroupVersion.Group, peerGroup[plural]} {
					full, gr := schema.ParseResourceArg(plural + "." + group)
					var got schema.GroupVersionResource
					if full != nil {
						got, _ = mapper.ResourceFor(*full)
					}
					if got.Empty() {
						got, err = mapper.ResourceFor(gr.WithVersion(""))
						require.NoError(t, err)
					}
					assert.Equal(t, group, got.Group, "kubectl get %s.%s", plural, group)
				}
			})
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
			// Our objects need a valid spec; the peers' open schema takes any.
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
	case "ClusterSubnet":
		spec = map[string]any{
			"clusterName":   "beside",
			"parentPoolRef": map[string]any{"kind": "NetboxIPPool", "name": "beside"},
		}
	default:
		t.Fatalf("unknown kind %s", o.GetKind())
	}
	require.NoError(t, unstructured.SetNestedField(o.Object, spec, "spec"))
}
