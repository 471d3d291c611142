package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// The checks below hold each page a reader looks in against what the code
// has: a reason, metric, operation, RBAC object or page added without its
// line fails here.

func readDoc(t *testing.T, path ...string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{envtestenv.RepoRoot()}, path...)...))
	require.NoError(t, err)
	return string(raw)
}

// section is the text of a markdown section, from its heading to the next
// heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	start := strings.Index(doc, "\n"+heading+"\n")
	require.NotEqual(t, -1, start, "no section %q", heading)
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	rest := doc[start+len(heading)+2:]
	next := regexp.MustCompile(fmt.Sprintf(`(?m)^#{1,%d} `, level)).FindStringIndex(rest)
	if next == nil {
		return rest
	}
	return rest[:next[0]]
}

var firstCell = regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|")

// TestReadmeConditionsTableHasEveryReadyReason: the README's table lists
// every reason of the pools' and the claims' Ready conditions that
// docs/troubleshooting.md explains, and every event on Clusters.
func TestReadmeConditionsTableHasEveryReadyReason(t *testing.T) {
	readme := section(t, readDoc(t, "README.md"), "### Conditions")
	trouble := readDoc(t, "docs", "troubleshooting.md")
	rows := map[string][]string{}
	for _, line := range strings.Split(readme, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) < 2 {
			continue
		}
		rows[cells[0]] = append(rows[cells[0]], cells[1])
	}
	for _, tc := range []struct{ heading, object string }{
		{"## Pools: the `Ready` condition", "pool"},
		{"## Claims: the `Ready` condition", "claim"},
		{"## Events on Clusters", "Cluster (event)"},
	} {
		found := firstCell.FindAllStringSubmatch(section(t, trouble, tc.heading), -1)
		require.NotEmpty(t, found, "no reasons under %q", tc.heading)
		for _, m := range found {
			assert.True(t, strings.Contains(strings.Join(rows[tc.object], " "), "`"+m[1]+"`"),
				"README.md's conditions table has no %q row for %s (docs/troubleshooting.md %s)", tc.object, m[1], tc.heading)
		}
	}
}

// TestMetricsPageNamesEveryMetricAndOperation: docs/metrics.md names every
// metric the provider registers, every operation and outcome of
// capi_ipam_bridge_backend_operations_total, and every alert shipped.
func TestMetricsPageNamesEveryMetricAndOperation(t *testing.T) {
	root := envtestenv.RepoRoot()
	page := readDoc(t, "docs", "metrics.md")
	names := regexp.MustCompile(`"(capi_ipam_bridge_[a-z_]+)"`)
	operations := regexp.MustCompile(`timed(?:Err)?\(i, "([a-z_]+)"`)
	outcomes := regexp.MustCompile(`\{backends\.Err[A-Za-z]+, "([a-z_]+)"\}`)
	seen := map[string]string{}
	for _, dir := range []string{"controllers", "pkg"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, re := range []*regexp.Regexp{names, operations, outcomes} {
				for _, m := range re.FindAllStringSubmatch(string(src), -1) {
					seen[m[1]] = relative(root, path)
				}
			}
			return nil
		}))
	}
	require.Contains(t, seen, "write_mac", "the operations of controllers/metrics are read")
	require.Contains(t, seen, "capi_ipam_bridge_backend_throttled_total", "pkg/backendhttp's metrics are read")
	for name, where := range seen {
		assert.True(t, strings.Contains(page, "`"+name+"`"), "docs/metrics.md does not name %s (from %s)", name, where)
	}

	var rules struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readDoc(t, "config", "prometheus", "rules.yaml")), &rules))
	runbook := readDoc(t, "docs", "runbook.md")
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			assert.True(t, strings.Contains(page, "`"+r.Alert+"`"), "docs/metrics.md does not say which event fires %s", r.Alert)
			assert.True(t, strings.Contains(runbook, "\n## "+r.Alert+"\n"), "docs/runbook.md has no section for %s", r.Alert)
		}
	}
}

// TestInstallPageNamesEveryReleasedObjectOfAccess: docs/install.md names
// every RBAC object, ServiceAccount and admission policy the components
// install, so that an administrator reviewing the install sees each.
func TestInstallPageNamesEveryReleasedObjectOfAccess(t *testing.T) {
	raw, err := components.Components(envtestenv.RepoRoot(), "v0.1.0")
	require.NoError(t, err)
	page := readDoc(t, "docs", "install.md")
	kinds := map[string]bool{"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true,
		"RoleBinding": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}
	n := 0
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if !kinds[obj.Kind] {
			continue
		}
		n++
		assert.True(t, strings.Contains(page, "`"+obj.Metadata.Name+"`"), "docs/install.md does not name the %s %s the components install", obj.Kind, obj.Metadata.Name)
	}
	require.NotZero(t, n)
}

// TestDocsIndexLinksEveryPage: docs/README.md links every page of docs/.
func TestDocsIndexLinksEveryPage(t *testing.T) {
	index := readDoc(t, "docs", "README.md")
	pages, err := filepath.Glob(filepath.Join(envtestenv.RepoRoot(), "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		assert.True(t, strings.Contains(index, "]("+name+")"), "docs/README.md does not link %s", name)
	}
}
