// Package docs checks the YAML in README.md, docs/*.md and config/samples
// against the real CRDs on a real kube-apiserver (envtest): every object of
// our API group, every IPAddressClaim and every Secret is created with
// server-side dry-run and strict field validation, so the schema and the CEL
// rules apply. Objects of other providers (CAPV, Metal3), whose CRDs are not
// installed, and YAML fragments are parsed, and every pool reference in them
// must name one of our kinds. It also checks that docs/troubleshooting.md
// explains every condition reason the controllers set.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

const (
	// defaultNamespace is where namespaced objects without a namespace go.
	defaultNamespace = "docs"
	group            = "ipam-bridge.github.io"
)

// poolKinds are the kinds a pool reference may name.
var poolKinds = []string{"NetboxIPPool", "GlobalNetboxIPPool", "InfobloxIPPool", "GlobalInfobloxIPPool"}

// foreignKinds are other providers' kinds whose pool references are checked.
var foreignKinds = []string{"VSphereMachineTemplate", "VSphereMachine", "Metal3DataTemplate"}

var (
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) {
	env, cfg, err := envtestenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restConfig = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// document is one YAML document found in a file.
type document struct {
	where string // file:line
	obj   map[string]any
}

func TestDocumentedYAML(t *testing.T) {
	root := envtestenv.RepoRoot()
	docs := collect(t, root)
	require.NotEmpty(t, docs)

	validated := map[string]int{}
	for _, d := range docs {
		t.Run(d.where, func(t *testing.T) {
			refs := checkPoolRefs(t, d.obj, "")
			apiVersion, _ := d.obj["apiVersion"].(string)
			kind, _ := d.obj["kind"].(string)
			switch {
			case apiVersion == "" || kind == "":
				// A fragment: a clusterctl.yaml, a part of another object.
				checkClusterctlConfig(t, d.obj)
			case strings.HasPrefix(apiVersion, group+"/") || (apiVersion == "v1" && (kind == "Secret" || kind == "Namespace")) ||
				(apiVersion == ipamv1.GroupVersion.String() && kind == "IPAddressClaim"):
				dryRunCreate(t, d.obj)
				validated[kind]++
			case apiVersion == clusterv1.GroupVersion.String() && (kind == "Cluster" || kind == "ClusterClass"):
				checkEndpointOptIn(t, d.obj)
				dryRunCreate(t, d.obj)
			case apiVersion == "operator.cluster.x-k8s.io/v1alpha2" && kind == "IPAMProvider":
				checkIPAMProvider(t, d.obj)
			case apiVersion == "controlplane.cluster.x-k8s.io/v1beta2" && kind == "KubeadmControlPlane":
				checkKubeVipRecipe(t, d.obj)
			case slices.Contains(foreignKinds, kind):
				assert.NotZero(t, refs, "%s has no reference to one of our pools", kind)
			default:
				t.Errorf("%s %s: the docs test does not know this kind; validate it or add it to foreignKinds", apiVersion, kind)
			}
		})
	}
	// Every pool kind is shown somewhere, and so is its Secret.
	for _, kind := range append(slices.Clone(poolKinds), "Secret") {
		assert.NotZero(t, validated[kind], "no %s in the docs or samples", kind)
	}
}

// checkEndpointOptIn checks that a Cluster's control-plane endpoint opt-in,
// if any, names one of our pool kinds (unless it names another group).
func checkEndpointOptIn(t *testing.T, obj map[string]any) {
	t.Helper()
	annotations, _, _ := unstructured.NestedStringMap(obj, "metadata", "annotations")
	ref, ok := annotations[v1alpha1.ControlPlaneEndpointPoolAnnotation]
	if !ok {
		return
	}
	kind, name, _ := strings.Cut(ref, "/")
	assert.NotEmpty(t, name, "%s names no pool", v1alpha1.ControlPlaneEndpointPoolAnnotation)
	if g, ok := annotations[v1alpha1.ControlPlaneEndpointPoolGroupAnnotation]; !ok || g == group {
		assert.Contains(t, poolKinds, kind, "%s must name one of our pool kinds", v1alpha1.ControlPlaneEndpointPoolAnnotation)
	}
}

// checkKubeVipRecipe checks the control-plane endpoint's kube-vip recipe
// for a plain Cluster: rendered as `clusterctl generate yaml` renders it,
// with the address the Cluster got, its kube-vip manifest is a Pod that
// announces that address.
func checkKubeVipRecipe(t *testing.T, obj map[string]any) {
	t.Helper()
	const vip = "10.120.0.5"
	raw, err := yaml.Marshal(obj)
	require.NoError(t, err)
	processor := yamlprocessor.NewSimpleProcessor()
	names, err := processor.GetVariables(raw)
	require.NoError(t, err)
	assert.Equal(t, []string{"CONTROL_PLANE_ENDPOINT_IP"}, names, "the recipe's only variable is the address")
	rendered, err := processor.Process(raw, func(name string) (string, error) {
		if name == "CONTROL_PLANE_ENDPOINT_IP" {
			return vip, nil
		}
		return "", fmt.Errorf("variable %s not set", name)
	})
	require.NoError(t, err)
	kcp := map[string]any{}
	require.NoError(t, yaml.Unmarshal(rendered, &kcp))
	files, _, _ := unstructured.NestedSlice(kcp, "spec", "kubeadmConfigSpec", "files")
	var manifest string
	for _, f := range files {
		if f, ok := f.(map[string]any); ok && f["path"] == "/etc/kubernetes/manifests/kube-vip.yaml" {
			manifest, _ = f["content"].(string)
		}
	}
	require.NotEmpty(t, manifest, "the KubeadmControlPlane writes no kube-vip manifest")
	pod := &corev1.Pod{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), pod), "kube-vip's manifest is not a Pod")
	assert.Equal(t, "Pod", pod.Kind)
	require.Len(t, pod.Spec.Containers, 1)
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, vip, env["address"], "kube-vip announces the Cluster's endpoint")
	assert.Equal(t, "true", env["cp_enable"], "for the control plane")
	assert.True(t, pod.Spec.HostNetwork, "a VIP is announced from the host's network")
}

// checkIPAMProvider checks a cluster-api-operator IPAMProvider: it names
// the provider as clusterctl does and fetches our components.
func checkIPAMProvider(t *testing.T, obj map[string]any) {
	t.Helper()
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	assert.Equal(t, components.ProviderName, name, "the operator's provider name is clusterctl's")
	url, _, _ := unstructured.NestedString(obj, "spec", "fetchConfig", "url")
	assert.True(t, strings.HasSuffix(url, "/"+components.ComponentsFile), "fetchConfig.url %q must name %s", url, components.ComponentsFile)
	version, _, _ := unstructured.NestedString(obj, "spec", "version")
	assert.Contains(t, url, "/"+version+"/", "fetchConfig.url names another version than spec.version")
}

// collect finds the YAML documents of every ```yaml block in README.md and
// docs/*.md, and of every file in config/samples.
func collect(t *testing.T, root string) []document {
	t.Helper()
	var out []document
	markdown, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	markdown = append([]string{filepath.Join(root, "README.md")}, markdown...)
	for _, path := range markdown {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, block := range yamlBlocks(string(raw)) {
			out = append(out, parseDocuments(t, relative(root, path), block.line, block.text)...)
		}
	}
	samples, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, samples, "config/samples holds no samples")
	for _, path := range samples {
		if filepath.Base(path) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		out = append(out, parseDocuments(t, relative(root, path), 1, string(raw))...)
	}
	return out
}

type block struct {
	line int
	text string
}

var (
	fenceOpen  = regexp.MustCompile("^(\\s*)```(yaml|yml)\\s*$")
	fenceClose = regexp.MustCompile("^\\s*```\\s*$")
)

// yamlBlocks returns the ```yaml fenced blocks of a Markdown text, with the
// fence's indentation (a block inside a list item) removed.
func yamlBlocks(markdown string) []block {
	var out []block
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent := m[1]
		var body []string
		start := i + 2
		for i++; i < len(lines) && !fenceClose.MatchString(lines[i]); i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		out = append(out, block{line: start, text: strings.Join(body, "\n")})
	}
	return out
}

func parseDocuments(t *testing.T, file string, line int, text string) []document {
	t.Helper()
	var out []document
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for i := 0; ; i++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s:%d", file, line)
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		obj := map[string]any{}
		require.NoError(t, yaml.Unmarshal(raw, &obj), "%s:%d: document %d is not valid YAML", file, line, i+1)
		if len(obj) == 0 {
			continue // only comments
		}
		out = append(out, document{where: fmt.Sprintf("%s:%d#%d", file, line, i+1), obj: obj})
	}
	return out
}

func relative(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return rel
}

// checkPoolRefs finds every reference to our API group (a map with apiGroup
// and kind) in v and checks that it names one of our pool kinds and a pool.
func checkPoolRefs(t *testing.T, v any, path string) int {
	t.Helper()
	n := 0
	switch v := v.(type) {
	case map[string]any:
		if g, ok := v["apiGroup"].(string); ok && g == group {
			n++
			kind, _ := v["kind"].(string)
			assert.Contains(t, poolKinds, kind, "%s: a reference to %s must name one of our pool kinds", path, group)
			name, _ := v["name"].(string)
			assert.NotEmpty(t, name, "%s: a pool reference needs a name", path)
		}
		for k, child := range v {
			n += checkPoolRefs(t, child, path+"."+k)
		}
	case []any:
		for i, child := range v {
			n += checkPoolRefs(t, child, path+"["+strconv.Itoa(i)+"]")
		}
	}
	return n
}

// checkClusterctlConfig checks a clusterctl.yaml providers entry for us.
func checkClusterctlConfig(t *testing.T, obj map[string]any) {
	t.Helper()
	providers, ok := obj["providers"].([]any)
	if !ok {
		return
	}
	for _, p := range providers {
		entry, _ := p.(map[string]any)
		if entry["name"] != "bridge" {
			continue
		}
		assert.Equal(t, "IPAMProvider", entry["type"], "the provider's type in clusterctl.yaml")
		url, _ := entry["url"].(string)
		assert.True(t, strings.HasSuffix(url, "/ipam-components.yaml"), "url %q must name ipam-components.yaml", url)
		if strings.HasPrefix(url, "file://") {
			assert.Regexp(t, `/ipam-bridge/v[0-9][^/]*/ipam-components\.yaml$`, url,
				"a file:// url must follow clusterctl's local repository layout .../ipam-bridge/<version>/ipam-components.yaml")
		}
	}
}

// dryRunCreate creates obj with server-side dry-run and strict field validation.
func dryRunCreate(t *testing.T, raw map[string]any) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: raw}
	mapping, err := k8s.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	require.NoError(t, err, "the API server does not serve %s", u.GroupVersionKind())
	if mapping.Scope.Name() == "namespace" {
		if u.GetNamespace() == "" {
			u.SetNamespace(defaultNamespace)
		}
		ensureNamespace(t, u.GetNamespace())
	} else {
		assert.Empty(t, u.GetNamespace(), "%s is cluster-scoped and takes no namespace", u.GetKind())
	}
	err = k8s.Create(ctx, u, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	assert.NoError(t, err, "%s %s is rejected by the API server", u.GetKind(), u.GetName())
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// TestTroubleshootingCoversEveryReason checks that docs/troubleshooting.md
// names every condition reason the controllers set: the Reason constants of
// api/v1alpha1 and of every package under controllers/ (events on Clusters
// too), CAPI's claim reasons the controllers use, and literal reasons in
// controllers/.
func TestTroubleshootingCoversEveryReason(t *testing.T) {
	root := envtestenv.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	require.NoError(t, err)

	reasons := map[string]string{}
	dirs := []string{filepath.Join(root, "api", "v1alpha1")}
	// Every package of controllers/: the reasons live where they are set.
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "controllers"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "internal" && d.Name() != "apitest" {
			dirs = append(dirs, path)
		}
		return err
	}))
	for _, dir := range dirs {
		for value, where := range reasonConstants(t, dir) {
			reasons[value] = where
		}
	}
	// CAPI's reasons used by the controllers.
	literal := regexp.MustCompile(`Reason:\s*"([A-Za-z]+)"`)
	capi := regexp.MustCompile(`(?:ipamv1|clusterv1)\.([A-Za-z]+Reason)\b`)
	capiValues := map[string]string{
		"IPAddressClaimReadyAllocationFailedReason": "AllocationFailed",
		"IPAddressClaimReadyPoolNotReadyReason":     "PoolNotReady",
		"IPAddressClaimReadyPoolExhaustedReason":    "PoolExhausted",
		"PausedReason":                              "Paused",
		"NotPausedReason":                           "NotPaused",
	}
	var files []string
	for _, dir := range dirs[1:] {
		found, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		files = append(files, found...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			reasons[m[1]] = relative(root, f)
		}
		for _, m := range capi.FindAllStringSubmatch(string(src), -1) {
			value, ok := capiValues[m[1]]
			if assert.True(t, ok, "%s uses %s: add its value to this test", relative(root, f), m[1]) {
				reasons[value] = relative(root, f)
			}
		}
	}
	require.NotEmpty(t, reasons)
	// The walk reaches the shared reasons and the endpoint's events.
	require.Contains(t, reasons, "ReleaseLeft")
	require.Contains(t, reasons, "ControlPlaneEndpointKept")
	for value, where := range reasons {
		assert.Contains(t, string(doc), "| `"+value+"` |", "docs/troubleshooting.md has no table row for reason %s (from %s)", value, where)
	}
}

// reasonConstants returns the string constants named *Reason in the Go files
// of dir, by value.
func reasonConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasSuffix(name.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[value] = filepath.Base(dir) + "." + name.Name
				}
			}
		}
	}
	return out
}
