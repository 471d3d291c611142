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
	Dir        string
	// Imports are its non-test imports, Deps everything they import in
	// turn, the standard library's and other modules' packages included.
	Imports []string
	Deps    []string
}

func repoRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// packages lists the module's packages (nested modules excluded, as
// ./... excludes them) with their non-test imports.
func packages(t *testing.T, root string) map[string][]string {
	imports := map[string][]string{}
	for path, p := range listed(t, root) {
		imports[path] = p.Imports
	}
	return imports
}

// listed is what go list says of the module's packages, by their path in
// the module.
func listed(t *testing.T, root string) map[string]pkg {
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Imports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
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
			_, again := rules[p[1]]
			require.False(t, again, "docs/architecture.md has two rows for %s: one says what it may import", p[1])
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

// TestNoPackageImportsItsParent: wiring never sits under what it wires
// (as poolkinds once sat under controllers), but a driver imports the
// protocol it implements (backends/<system> imports backends, as
// net/http/httptest imports net/http), and tests are free.
func TestNoPackageImportsItsParent(t *testing.T) {
	pkgs := packages(t, repoRoot(t))
	for path, imports := range pkgs {
		for _, imp := range imports {
			o := ours(imp)
			if o == "" || o == "." {
				continue
			}
			if strings.HasPrefix(path, o+"/") && o != "backends" && !strings.HasPrefix(path, "test/") {
				assert.Fail(t, "a package imports its parent", "%s imports %s", path, o)
			}
		}
	}
}

// ourDeps are the packages of ours that path imports, directly or through
// others.
func ourDeps(p pkg) []string {
	var deps []string
	for _, d := range p.Deps {
		if o := ours(d); o != "" {
			deps = append(deps, o)
		}
	}
	return deps
}

// isDriver says whether path is an IPAM system's driver.
func isDriver(path string) bool { return strings.HasPrefix(path, "backends/") }

// TestControllersNeverReachHTTPOrADriver: the controllers reach an IPAM
// system only through backends.Backend, built by cmd/poolkinds. No package
// under controllers/ (but the test support, which logs the writes it sends
// the test API server) imports a driver or a package of ours that speaks
// HTTP, directly or through another package of ours.
func TestControllersNeverReachHTTPOrADriver(t *testing.T) {
	pkgs := listed(t, repoRoot(t))
	for path, p := range pkgs {
		// The API types know nothing of HTTP either.
		if !(strings.HasPrefix(path, "controllers") || strings.HasPrefix(path, "api/")) || path == "controllers/internal/apitest" {
			continue
		}
		assert.NotContains(t, p.Imports, "net/http", "%s imports net/http", path)
		for _, dep := range ourDeps(p) {
			if dep == "controllers/internal/apitest" {
				continue
			}
			assert.False(t, isDriver(dep), "%s reaches the driver %s", path, dep)
			assert.NotContains(t, pkgs[dep].Imports, "net/http", "%s reaches %s, which imports net/http", path, dep)
		}
	}
}

var reconcileRE = regexp.MustCompile(`(?m)^func \(\w+ \*\w+\) Reconcile\(ctx context\.Context`)

// reconcilers are the packages of ours that hold a reconciler: a type with
// a Reconcile method.
func reconcilers(t *testing.T, pkgs map[string]pkg) map[string]bool {
	found := map[string]bool{}
	for path, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(p.Dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			if reconcileRE.Match(src) {
				found[path] = true
			}
		}
	}
	return found
}

// TestNoReconcilerReachesAnother: what two reconcilers share lives in a
// package of its own; none imports another reconciler's package, directly
// or through another package. Only controllers (Setup) and cmd wire them.
func TestNoReconcilerReachesAnother(t *testing.T) {
	pkgs := listed(t, repoRoot(t))
	rs := reconcilers(t, pkgs)
	require.Contains(t, rs, "controllers/claim", "the claim reconciler is found")
	for path := range rs {
		for _, dep := range ourDeps(pkgs[path]) {
			assert.False(t, rs[dep], "the reconciler package %s reaches the reconciler package %s", path, dep)
		}
	}
}

// TestBackendsNeverReachKubernetes: the protocol, the drivers and the HTTP
// client know nothing of Kubernetes, not even through a library.
func TestBackendsNeverReachKubernetes(t *testing.T) {
	pkgs := listed(t, repoRoot(t))
	for path, p := range pkgs {
		if !(path == "backends" || isDriver(path) || path == "pkg/backendhttp" || path == "pkg/attempts") {
			continue
		}
		for _, dep := range append(slices.Clone(p.Imports), p.Deps...) {
			assert.False(t, strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/"),
				"%s reaches %s: the backends know nothing of Kubernetes", path, dep)
		}
	}
}
