package architecture

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTopDown are the packages whose files read from the top down: a file
// uses what files below it declare, never what a file that uses it
// declares. The claim reconciler is one (its package comment says so):
// Reconcile, then the phase lists, then each phase, then what they share.
var readTopDown = []string{"controllers/claim"}

// TestFilesReadTopDown fails on a circle of files inside a package that
// reads from the top down: file a uses a name that file b declares (a
// function, a type, a method or a field of one), and b, through any
// number of files, uses one that a declares.
func TestFilesReadTopDown(t *testing.T) {
	root := repoRoot(t)
	for _, pkgPath := range readTopDown {
		t.Run(pkgPath, func(t *testing.T) {
			uses := fileUses(t, filepath.Join(root, pkgPath))
			require.NotEmpty(t, uses, "the package has files that use one another")
			for _, circle := range circles(uses) {
				assert.Failf(t, "files use one another in a circle",
					"%s: move what the lower file needs below it", strings.Join(circle, ", "))
			}
		})
	}
}

// fileUses type-checks the package's own files (not its tests) and returns,
// for each file, the other files of the package whose declarations it uses.
// Imports are stood in for by empty packages: only the package's own names
// are looked up, and they resolve without them.
func fileUses(t *testing.T, dir string) map[string][]string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{
		Importer: emptyPackages{std: importer.Default()},
		// The stand-ins make every use of an import an error; the
		// package's own names resolve all the same.
		Error: func(error) {},
	}
	pkg, _ := conf.Check(dir, fset, files, info)
	require.NotNil(t, pkg)

	declaredIn := func(obj types.Object) string {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return ""
		}
		// Package-level names, and methods and fields of package types;
		// not a function's own locals.
		if obj.Parent() != nil && obj.Parent() != pkg.Scope() {
			return ""
		}
		return filepath.Base(fset.Position(obj.Pos()).Filename)
	}
	uses := map[string][]string{}
	add := func(from string, obj types.Object) {
		to := declaredIn(obj)
		if to != "" && to != from && !slices.Contains(uses[from], to) {
			uses[from] = append(uses[from], to)
		}
	}
	for _, f := range files {
		from := filepath.Base(fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				add(from, info.Uses[n])
			case *ast.SelectorExpr:
				if sel := info.Selections[n]; sel != nil {
					add(from, sel.Obj())
				}
			}
			return true
		})
	}
	return uses
}

// emptyPackages imports the standard library and stands in for every
// other package with an empty one of the name its path ends in.
type emptyPackages struct{ std types.Importer }

func (e emptyPackages) Import(p string) (*types.Package, error) {
	if !strings.Contains(strings.Split(p, "/")[0], ".") {
		if pkg, err := e.std.Import(p); err == nil {
			return pkg, nil
		}
	}
	pkg := types.NewPackage(p, path.Base(p))
	pkg.MarkComplete()
	return pkg, nil
}

// circles returns the circles of the graph, one per strongly connected
// component of more than one file, each sorted by name.
func circles(uses map[string][]string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var found [][]string
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range uses[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var component []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			component = append(component, w)
			if w == v {
				break
			}
		}
		if len(component) > 1 {
			slices.Sort(component)
			found = append(found, component)
		}
	}
	files := make([]string, 0, len(uses))
	for f := range uses {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	return found
}

// TestCirclesAreFound: the check fails on a circle, however long, and not
// on a chain.
func TestCirclesAreFound(t *testing.T) {
	assert.Empty(t, circles(map[string][]string{"a.go": {"b.go"}, "b.go": {"c.go"}}))
	assert.Equal(t, [][]string{{"a.go", "b.go", "c.go"}},
		circles(map[string][]string{"a.go": {"b.go"}, "b.go": {"c.go"}, "c.go": {"a.go"}, "d.go": {"a.go"}}))
}
