package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

const (
	releaseVersion = "v0.1.0"
	targetNS       = components.TargetNamespace
	fieldOwner     = "clusterctl"
	// markerIdentity is supplied as a clusterctl variable.
	markerIdentity = "release-test"
)

// wantVariables are the clusterctl variables of the components, each with a
// default: `clusterctl generate provider --describe` lists them.
var wantVariables = []string{
	"IPAM_BRIDGE_ALLOWED_ENDPOINTS",
	"IPAM_BRIDGE_DIAGNOSTICS_ADDRESS",
	"IPAM_BRIDGE_INSECURE_DIAGNOSTICS",
	"IPAM_BRIDGE_LOG_LEVEL",
	"IPAM_BRIDGE_MARKER_IDENTITY",
	"IPAM_BRIDGE_WATCH_FILTER",
	"IPAM_BRIDGE_WATCH_NAMESPACE",
}

// repository builds the release into a clusterctl local repository in a
// temporary directory, as `make release-repository` does, and returns the
// URL of its components.
func repository(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	versionDir := filepath.Join(dir, components.ProviderLabel, releaseVersion)
	require.NoError(t, components.Write(envtestenv.RepoRoot(), releaseVersion, versionDir))
	return "file://" + filepath.Join(versionDir, components.ComponentsFile)
}

// render renders the components with clusterctl's library, as `clusterctl
// init --ipam bridge` would, from a clusterctl.yaml that adds the provider
// and sets variables.
func render(t *testing.T, url string, variables map[string]string, targetNamespace string) clusterctl.Components {
	t.Helper()
	config := map[string]any{}
	for k, v := range variables {
		config[k] = v
	}
	comps, err := generate(t, url, config, clusterctl.ComponentsOptions{TargetNamespace: targetNamespace})
	require.NoError(t, err, "clusterctl generate provider --ipam %s:%s", components.ProviderName, releaseVersion)
	return comps
}

// generate runs clusterctl's `generate provider --ipam bridge` from a
// clusterctl.yaml that adds the provider and holds config.
func generate(t *testing.T, url string, config map[string]any, options clusterctl.ComponentsOptions) (clusterctl.Components, error) {
	t.Helper()
	dir := t.TempDir()
	// clusterctl reads nothing but the config file given and the environment.
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, v := range wantVariables {
		if _, ok := os.LookupEnv(v); ok {
			t.Setenv(v, "")
			require.NoError(t, os.Unsetenv(v))
		}
	}
	file := map[string]any{
		"providers": []map[string]string{{"name": components.ProviderName, "type": string(clusterctlv1.IPAMProviderType), "url": url}},
	}
	for k, v := range config {
		file[k] = v
	}
	raw, err := yaml.Marshal(file)
	require.NoError(t, err)
	path := filepath.Join(dir, "clusterctl.yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))

	ctx := context.Background()
	c, err := clusterctl.New(ctx, path)
	require.NoError(t, err)
	return c.GenerateProvider(ctx, components.ProviderName+":"+releaseVersion, clusterctlv1.IPAMProviderType, options)
}

// The release, rendered with variables and applied once; the RBAC test
// needs it installed too.
var (
	installOnce sync.Once
	installed   []unstructured.Unstructured
	installErr  error
)

func install(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	_, k8s := startEnv(t)
	installOnce.Do(func() {
		installErr = fmt.Errorf("installing the release failed in the first test that needed it")
		comps := render(t, repository(t), map[string]string{"IPAM_BRIDGE_MARKER_IDENTITY": markerIdentity}, "")
		objs := comps.Objs()
		applyComponents(t, k8s, objs)
		installed, installErr = objs, nil
	})
	require.NoError(t, installErr)
	return installed
}

// applyComponents applies rendered components as clusterctl init does: the
// Namespace first, for real (clusterctl sorts it first); then every object
// with dry-run; then every object for real; then it waits for the CRDs.
func applyComponents(t *testing.T, k8s client.Client, objs []unstructured.Unstructured) {
	t.Helper()
	require.NotEmpty(t, objs)
	require.Equal(t, "Namespace", objs[0].GetKind())
	apply(t, k8s, objs[0], false)
	for _, o := range objs[1:] {
		apply(t, k8s, o, true)
	}
	for _, o := range objs {
		apply(t, k8s, o, false)
	}
	waitCRDsEstablished(context.Background(), t, k8s, objs)
}

func apply(t *testing.T, k8s client.Client, o unstructured.Unstructured, dryRun bool) {
	t.Helper()
	opts := []client.ApplyOption{client.FieldOwner(fieldOwner), client.ForceOwnership}
	what := "applying"
	if dryRun {
		opts = append(opts, client.DryRunAll)
		what = "applying (dry-run=server)"
	}
	err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...)
	require.NoError(t, err, "%s %s %s/%s", what, o.GetKind(), o.GetNamespace(), o.GetName())
}

func waitCRDsEstablished(ctx context.Context, t *testing.T, k8s client.Client, objs []unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(c, k8s.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd))
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			assert.True(c, established, "CRD %s is not established", o.GetName())
		}, 30*time.Second, 100*time.Millisecond)
	}
	// The client's REST mapper learns the new kinds lazily.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := k8s.RESTMapper().RESTMapping(schema.GroupKind{Group: "ipam-bridge.github.io", Kind: "NetboxIPPool"})
		assert.NoError(c, err)
	}, 30*time.Second, 200*time.Millisecond)
}

func TestReleaseInstallsWithClusterctl(t *testing.T) {
	_, k8s := startEnv(t)
	objs := install(t)
	root := envtestenv.RepoRoot()

	t.Run("variables all have defaults", func(t *testing.T) {
		url := repository(t)
		raw, err := os.ReadFile(strings.TrimPrefix(url, "file://"))
		require.NoError(t, err)
		vars, err := yamlprocessor.NewSimpleProcessor().GetVariableMap(raw)
		require.NoError(t, err)
		var names []string
		for name, def := range vars {
			names = append(names, name)
			assert.NotNil(t, def, "variable %s has no default: clusterctl init would fail without it", name)
		}
		assert.ElementsMatch(t, wantVariables, names)
		// Rendered without any variable set, the defaults apply.
		comps := render(t, url, nil, "")
		assert.ElementsMatch(t, wantVariables, comps.Variables())
		assert.Equal(t, []string{components.ImageRepository + ":" + releaseVersion}, comps.Images())
		args := effectiveArgs(t, deployment(t, comps.Objs()).Spec.Template.Spec.Containers[0])
		assert.Subset(t, args, []string{"--namespace=", "--watch-filter=", "--marker-identity=", "--v=0",
			"--diagnostics-address=:8443", "--insecure-diagnostics=false"})
	})

	t.Run("generate provider --describe and --raw work", func(t *testing.T) {
		// Both skip the variables' substitution; clusterctl still parses
		// every image, which a ${VAR} image would fail.
		comps, err := generate(t, repository(t), nil, clusterctl.ComponentsOptions{SkipTemplateProcess: true})
		require.NoError(t, err, "clusterctl generate provider --ipam bridge --describe")
		assert.ElementsMatch(t, wantVariables, comps.Variables())
		assert.Equal(t, []string{components.Image(releaseVersion)}, comps.Images())
	})

	t.Run("clusterctl's images: override names the manager's image", func(t *testing.T) {
		comps, err := generate(t, repository(t), map[string]any{
			"images": map[string]any{components.ProviderLabel: map[string]string{"repository": "registry.example.com/capi"}},
		}, clusterctl.ComponentsOptions{})
		require.NoError(t, err)
		want := "registry.example.com/capi/cluster-api-ipam-provider-bridge:" + releaseVersion
		assert.Equal(t, []string{want}, comps.Images())
		assert.Equal(t, want, deployment(t, comps.Objs()).Spec.Template.Spec.Containers[0].Image)
	})

	t.Run("metadata", func(t *testing.T) {
		_, md, err := components.Metadata(root, releaseVersion)
		require.NoError(t, err)
		series := md.GetReleaseSeriesForContract("v1beta2")
		require.NotNil(t, series)
		assert.Equal(t, int32(0), series.Major)
		assert.Equal(t, int32(1), series.Minor)
		_, _, err = components.Metadata(root, "v7.3.0")
		assert.Error(t, err, "a version without a release series must be refused")
	})

	t.Run("every CRD is shipped and labelled", func(t *testing.T) {
		bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
		require.NoError(t, err)
		var want, got []string
		for _, b := range bases {
			raw, err := os.ReadFile(b)
			require.NoError(t, err)
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, yaml.Unmarshal(raw, crd))
			want = append(want, crd.Name)
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			got = append(got, o.GetName())
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: o.GetName()}, crd))
			labels := crd.GetLabels()
			assert.Equal(t, "", labels[clusterctlv1.ClusterctlMoveLabel], "%s", crd.Name)
			assert.Contains(t, labels, clusterctlv1.ClusterctlMoveLabel, "%s", crd.Name)
			assert.NotContains(t, labels, clusterctlv1.ClusterctlMoveHierarchyLabel,
				"%s: clusterctl move would leave a Global pool's IPAddresses in the source", crd.Name)
			contract, ok := labels["cluster.x-k8s.io/v1beta2"]
			assert.True(t, ok, "%s has no cluster.x-k8s.io/v1beta2 label", crd.Name)
			for _, v := range strings.Split(contract, "_") {
				assert.True(t, slices.ContainsFunc(crd.Spec.Versions, func(cv apiextensionsv1.CustomResourceDefinitionVersion) bool {
					return cv.Name == v && cv.Served
				}), "%s: the contract label names version %q, which the CRD does not serve", crd.Name, v)
			}
			assert.Equal(t, "ipam-bridge", labels["cluster.x-k8s.io/provider"])
		}
		assert.ElementsMatch(t, want, got, "every CRD in config/crd/bases must be listed in config/crd/kustomization.yaml")
	})

	t.Run("nothing outside the target namespace but cluster-scoped objects", func(t *testing.T) {
		for _, o := range objs {
			mapping, err := k8s.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
			require.NoError(t, err)
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				assert.Equal(t, targetNS, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
			} else if o.GroupVersionKind().Group != "admissionregistration.k8s.io" {
				// clusterctl v1.14 does not know admission policies are
				// cluster-scoped and sets the target namespace on them; the
				// API server drops it on create.
				assert.Empty(t, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
			}
			assert.Equal(t, "ipam-bridge", o.GetLabels()["cluster.x-k8s.io/provider"], "%s %s", o.GetKind(), o.GetName())
			switch o.GetKind() {
			case "ClusterRoleBinding", "RoleBinding":
				subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				for _, s := range subjects {
					ns, _, _ := unstructured.NestedString(s.(map[string]any), "namespace")
					assert.Equal(t, targetNS, ns, "%s %s binds a subject in another namespace", o.GetKind(), o.GetName())
				}
			}
		}
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
		assert.Equal(t, map[string]int{"Namespace": 1, "CustomResourceDefinition": 5, "ClusterRole": 5, "ClusterRoleBinding": 1,
			"Role": 1, "RoleBinding": 1, "ServiceAccount": 1, "Deployment": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1}, kinds)
	})

	t.Run("another target namespace", func(t *testing.T) {
		comps := render(t, repository(t), nil, "ipam-elsewhere")
		for _, o := range comps.Objs() {
			if o.GetNamespace() != "" {
				assert.Equal(t, "ipam-elsewhere", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
			}
			if o.GetKind() == "Namespace" {
				assert.Equal(t, "ipam-elsewhere", o.GetName())
			}
		}
	})

	t.Run("deployment", func(t *testing.T) {
		d := &appsv1.Deployment{}
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: targetNS, Name: "capi-ipam-bridge-controller-manager"}, d))
		pod := d.Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		c := pod.Containers[0]
		assert.Equal(t, components.ImageRepository+":"+releaseVersion, c.Image)
		assert.Equal(t, "capi-ipam-bridge-manager", pod.ServiceAccountName)
		assert.Subset(t, effectiveArgs(t, c), []string{"--leader-elect=true", "--diagnostics-address=:8443", "--insecure-diagnostics=false", "--health-addr=:9440",
			"--namespace=", "--watch-filter=", "--marker-identity=" + markerIdentity, "--v=0"})

		require.NotNil(t, pod.SecurityContext)
		assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)
		require.NotNil(t, pod.SecurityContext.SeccompProfile)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
		sc := c.SecurityContext
		require.NotNil(t, sc)
		assert.Equal(t, ptr.To(true), sc.RunAsNonRoot)
		assert.NotEqual(t, ptr.To(int64(0)), sc.RunAsUser)
		assert.Equal(t, ptr.To(true), sc.ReadOnlyRootFilesystem)
		assert.Equal(t, ptr.To(false), sc.AllowPrivilegeEscalation)
		assert.Equal(t, ptr.To(false), sc.Privileged)
		require.NotNil(t, sc.Capabilities)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
		assert.Empty(t, sc.Capabilities.Add)
		require.NotNil(t, sc.SeccompProfile)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)

		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			assert.Contains(t, c.Resources.Requests, r)
		}
		assert.Contains(t, c.Resources.Limits, corev1.ResourceMemory)

		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		assert.Equal(t, map[string]int32{"metrics": 8443, "healthz": 9440}, ports)
		require.NotNil(t, c.LivenessProbe)
		require.NotNil(t, c.ReadinessProbe)
		assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
		assert.Equal(t, "healthz", c.LivenessProbe.HTTPGet.Port.String())
		assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
		assert.Equal(t, "healthz", c.ReadinessProbe.HTTPGet.Port.String())

		var podNS *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "POD_NAMESPACE" {
				podNS = &c.Env[i]
			}
		}
		require.NotNil(t, podNS, "POD_NAMESPACE is not set")
		require.NotNil(t, podNS.ValueFrom)
		require.NotNil(t, podNS.ValueFrom.FieldRef)
		assert.Equal(t, "metadata.namespace", podNS.ValueFrom.FieldRef.FieldPath)
		assert.Equal(t, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		// The manager's --graceful-shutdown-timeout defaults to 30s.
		assert.GreaterOrEqual(t, ptr.Deref(pod.TerminationGracePeriodSeconds, 30), int64(35),
			"the pod must outlive the manager's graceful shutdown")
	})

	t.Run("aggregated role for the core manager", func(t *testing.T) {
		role := &rbacv1.ClusterRole{}
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "capi-ipam-bridge-aggregated-manager-role"}, role))
		assert.Equal(t, "true", role.Labels["cluster.x-k8s.io/aggregate-to-manager"])
		var resources []string
		for _, r := range role.Rules {
			assert.Equal(t, []string{"ipam-bridge.github.io"}, r.APIGroups)
			resources = append(resources, r.Resources...)
		}
		assert.ElementsMatch(t, []string{"netboxippools", "globalnetboxippools", "infobloxippools", "globalinfobloxippools"}, resources)
	})

	// Kubernetes' clusterrole-aggregation controller (not run here) adds
	// the rules of roles with these labels to view, edit and admin: a
	// namespace's users reach its pools, never the global ones.
	t.Run("tenants see and edit their namespace's pools", func(t *testing.T) {
		for _, tc := range []struct {
			role   string
			labels []string
			verbs  []string
		}{
			{"capi-ipam-bridge-pools-view", []string{"view"}, []string{"get", "list", "watch"}},
			{"capi-ipam-bridge-pools-edit", []string{"edit", "admin"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		} {
			role := &rbacv1.ClusterRole{}
			require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: tc.role}, role))
			for _, l := range tc.labels {
				assert.Equal(t, "true", role.Labels["rbac.authorization.k8s.io/aggregate-to-"+l], "%s is not aggregated to %s", tc.role, l)
			}
			for _, resource := range []string{"netboxippools", "infobloxippools"} {
				for _, verb := range tc.verbs {
					assert.True(t, grants(role.Rules, resource, verb), "%s may not %s %s", tc.role, verb, resource)
				}
			}
			for _, resource := range []string{"globalnetboxippools", "globalinfobloxippools"} {
				assert.False(t, grants(role.Rules, resource, "get"), "%s may get %s", tc.role, resource)
			}
		}
	})
}

// grants says whether rules allow verb on a resource of our API group.
func grants(rules []rbacv1.PolicyRule, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, "ipam-bridge.github.io") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// effectiveArgs are the container's arguments as the kubelet passes them.
func effectiveArgs(t *testing.T, c corev1.Container) []string {
	t.Helper()
	args, err := managerproc.ContainerArgs(c)
	assert.NoError(t, err)
	return args
}

func deployment(t *testing.T, objs []unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d))
			return d
		}
	}
	require.Fail(t, "no Deployment in the components")
	return nil
}
