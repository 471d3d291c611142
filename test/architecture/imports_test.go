// Package architecture checks that the code keeps the layers that
// docs/architecture.md draws: each package imports only what the page's
// table lets it, the IPAM drivers know nothing of Kubernetes, the
// controllers nothing of HTTP, and no package imports its parent but the
// drivers the protocol they implement.
package architecture

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/ipam-bridge/cluster-api-ipam-provider-bridge"

// pkg is what go list says of one package of the module.
type pkg struct {
	ImportPath string
	Imports    []string
}

func repoRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// packages lists the module's packages (nested modules excluded, as
// ./... excludes them) with their non-test imports.
func packages(t *testing.T, root string) map[string][]string {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p.Imports
	}
	return pkgs
}

var (
	rowRE  = regexp.MustCompile("^\\| `([^`]+)` \\|")
	nameRE = regexp.MustCompile("`([^`]+)`")
)

// allowed reads the table of docs/architecture.md's section "What each
// package may import": a row per package, its last column the packages of
// ours it may import ("–" for none).
func allowed(t *testing.T, root string) map[string][]string {
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	defer f.Close()
	rules := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## What each package may import")
			continue
		}
		m := rowRE.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		last := cells[len(cells)-1]
		var may []string
		for _, n := range nameRE.FindAllStringSubmatch(last, -1) {
			may = append(may, n[1])
		}
		for _, p := range nameRE.FindAllStringSubmatch(cells[0], -1) {
			rules[p[1]] = may
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rules, "docs/architecture.md has no table under \"What each package may import\"")
	return rules
}

// ours is the module-relative path of an import of ours, or "".
func ours(imp string) string {
	if imp == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
		return rest
	}
	return ""
}

// TestEveryPackageImportsWhatTheArchitecturePageAllows: every package of
// the provider (all but test/ and hack/) has its row in the page's table,
// and imports of ours only what its row names.
func TestEveryPackageImportsWhatTheArchitecturePageAllows(t *testing.T) {
	root := repoRoot(t)
	pkgs, rules := packages(t, root), allowed(t, root)
	for path, imports := range pkgs {
		if strings.HasPrefix(path, "test/") || strings.HasPrefix(path, "hack/") {
			continue
		}
		may, ok := rules[path]
		if !assert.True(t, ok, "package %s has no row in docs/architecture.md: say what it is for and what it may import", path) {
			continue
		}
		for _, imp := range imports {
			if o := ours(imp); o != "" {
				assert.True(t, slices.Contains(may, o), "%s imports %s, which its row in docs/architecture.md does not allow", path, o)
			}
		}
	}
	for path := range rules {
		_, ok := pkgs[path]
		assert.True(t, ok, "docs/architecture.md names %s, which is no package", path)
	}
}

// TestLayers: what the table cannot say: the imports from outside the
// module, and the imports of a parent, which would put wiring under what
// it wires (as poolkinds once sat under controllers).
func TestLayers(t *testing.T) {
	pkgs := packages(t, repoRoot(t))
	for path, imports := range pkgs {
		for _, imp := range imports {
			// The drivers and the protocol know nothing of Kubernetes.
			if strings.HasPrefix(path, "backends") || path == "pkg/backendhttp" {
				assert.False(t, strings.HasPrefix(imp, "k8s.io/") || strings.HasPrefix(imp, "sigs.k8s.io/"),
					"%s imports %s: the backends know nothing of Kubernetes", path, imp)
			}
			// The controllers know nothing of HTTP; their test support
			// logs the writes it sends the test API server.
			if (strings.HasPrefix(path, "controllers") && path != "controllers/internal/apitest") || strings.HasPrefix(path, "api/") {
				assert.NotEqual(t, "net/http", imp, "%s imports net/http: the controllers reach IPAM systems only through backends.Backend", path)
			}
			o := ours(imp)
			if o == "" || o == "." {
				continue
			}
			// No package imports its parent, but a driver the protocol it
			// implements (backends/<system> imports backends, as
			// net/http/httptest imports net/http) and the tests.
			if strings.HasPrefix(path, o+"/") && o != "backends" && !strings.HasPrefix(path, "test/") {
				assert.Fail(t, "a package imports its parent", "%s imports %s", path, o)
			}
		}
	}
}
