package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// TestSecretPolicyNamesTheManagersAccount: the admission policy that limits
// what the manager may change in a Secret applies to the manager's
// ServiceAccount by its exact name, as the components name it: installed
// with clusterctl in its default or another target namespace, or built
// from config/default with another namePrefix. A policy that named another
// account would silently stop applying.
func TestSecretPolicyNamesTheManagersAccount(t *testing.T) {
	renamed := func(t *testing.T) []unstructured.Unstructured {
		// config/ as an operator would change it: another namePrefix.
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(envtestenv.RepoRoot(), "config"))))
		path := filepath.Join(dir, "default", "kustomization.yaml")
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		edited := strings.Replace(string(raw), "namePrefix: capi-ipam-bridge-", "namePrefix: acme-ipam-", 1)
		require.NotEqual(t, string(raw), edited, "config/default sets no namePrefix to change")
		require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
		out, err := components.Kustomize(filepath.Join(dir, "default"))
		require.NoError(t, err)
		objs, err := utilyaml.ToUnstructured(out)
		require.NoError(t, err)
		return objs
	}
	for _, tc := range []struct {
		name    string
		objs    func(t *testing.T) []unstructured.Unstructured
		account string
	}{
		{name: "clusterctl, default namespace", account: targetNS + ":" + serviceAccount,
			objs: func(t *testing.T) []unstructured.Unstructured { return render(t, repository(t), nil, "").Objs() }},
		{name: "clusterctl, another target namespace", account: "ipam-elsewhere:" + serviceAccount,
			objs: func(t *testing.T) []unstructured.Unstructured {
				return render(t, repository(t), nil, "ipam-elsewhere").Objs()
			}},
		{name: "another namePrefix", account: targetNS + ":acme-ipam-manager", objs: renamed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs(t)
			var accounts []string
			for _, o := range objs {
				if o.GetKind() == "ServiceAccount" {
					accounts = append(accounts, o.GetNamespace()+":"+o.GetName())
				}
			}
			require.Equal(t, []string{tc.account}, accounts, "the components' ServiceAccount")
			matches := policyMatch(t, objs)
			user := "system:serviceaccount:" + tc.account
			assert.True(t, matches(user), "the policy does not apply to the manager's account %s", user)
			ns, name, _ := strings.Cut(tc.account, ":")
			for _, other := range []string{
				"system:serviceaccount:" + ns + ":default",
				"system:serviceaccount:" + ns + ":" + name + "-other",
				"system:serviceaccount:" + ns + ":other-" + name,
				name,
				"system:admin",
			} {
				assert.False(t, matches(other), "the policy applies to %s too", other)
			}
		})
	}
}

// policyMatch returns whether the secret policy's match conditions hold for
// a request by username, evaluated with CEL as the API server does.
func policyMatch(t *testing.T, objs []unstructured.Unstructured) func(username string) bool {
	t.Helper()
	var policies []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			policies = append(policies, o)
		}
	}
	require.Len(t, policies, 1)
	conditions, found, err := unstructured.NestedSlice(policies[0].Object, "spec", "matchConditions")
	require.NoError(t, err)
	require.True(t, found, "the policy has no match conditions: it would apply to every user")
	env, err := cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)))
	require.NoError(t, err)
	var programs []cel.Program
	for _, c := range conditions {
		expr, _, _ := unstructured.NestedString(c.(map[string]any), "expression")
		ast, issues := env.Compile(expr)
		require.NoError(t, issues.Err(), "%s", expr)
		prg, err := env.Program(ast)
		require.NoError(t, err)
		programs = append(programs, prg)
	}
	return func(username string) bool {
		for _, prg := range programs {
			out, _, err := prg.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": username}}})
			require.NoError(t, err)
			if out.Value() != true {
				return false
			}
		}
		return true
	}
}
