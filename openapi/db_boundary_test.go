package openapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const dbImportPath = "github.com/ax-scheduler/ax/db"

// TestOpenAPICallsNoDBFunction keeps openapi (and its console) to mapping
// HTTP onto the services of queue: its non-test files may use db's types and errors but
// name none of db's functions, called or passed as values. The import's
// local name is read from each file, so an alias does not hide a call; a
// dot import is refused since it would.
func TestOpenAPICallsNoDBFunction(t *testing.T) {
	t.Parallel()
	funcs := packageFuncs(t, filepath.Join("..", "db"))
	require.NotEmpty(t, funcs, "found no functions in package db: is the path right?")

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	// The web console is held to the same: it calls the API in-process.
	consoleFiles, err := filepath.Glob(filepath.Join("console", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, consoleFiles)
	files = append(files, consoleFiles...)
	var uses []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		name, imported := dbImportName(t, f)
		if !imported {
			continue
		}
		require.NotEqual(t, ".", name, "%s dot-imports db: import it by name so its calls can be seen", path)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && funcs[sel.Sel.Name] {
				uses = append(uses, fset.Position(sel.Pos()).String()+": db."+sel.Sel.Name)
			}
			return true
		})
	}
	require.Empty(t, uses, "openapi calls package db directly; call a queue service instead")
}

// dbImportName is the name f refers to package db by, if it imports it.
func dbImportName(t *testing.T, f *ast.File) (string, bool) {
	t.Helper()
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		require.NoError(t, err)
		if path != dbImportPath {
			continue
		}
		if spec.Name != nil {
			return spec.Name.Name, spec.Name.Name != "_"
		}
		return "db", true
	}
	return "", false
}

// packageFuncs lists the package-level functions (not methods) declared
// in the non-test files of the package in dir.
func packageFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
	}
	return funcs
}
