package nodestatus

// Checks the hand-written ABI glue (abi_wasip1.go) against the bindings
// that wit-bindgen's Go generator (wit-bindgen-cli 0.61) writes for the same
// world, so that a change of the WIT cannot drift past the glue: the same
// imports and exports with the same core signatures, and, for each
// function, the same offsets in its return area, the same offsets in the
// elements of its lists, the same strides of those lists, and a return area
// at least as large. scripts/guests/go.sh runs the generator and gives its
// output in $NODESTATUS_WIT_BINDGEN_GO.

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// abiFunc is what the test knows of one import or export.
type abiFunc struct {
	Params, Results []string // core types
	Area            []int64  // offsets read or written in the return area
	Elem            []int64  // offsets read in list elements
	Strides         []int64  // list strides
	AreaSize        int64    // the return area's size (imports)
}

// abi is keyed "import NAME" or "export NAME".
type abi map[string]*abiFunc

// coreType is the core WebAssembly type of a Go parameter of a
// //go:wasmimport or //go:wasmexport function.
func coreType(e ast.Expr) string {
	switch t := types.ExprString(e); t {
	case "int32", "uint32", "uintptr", "unsafe.Pointer", "bool":
		return "i32"
	case "int64", "uint64":
		return "i64"
	case "float32":
		return "f32"
	case "float64":
		return "f64"
	default:
		return "?" + t
	}
}

func fieldTypes(fl *ast.FieldList) []string {
	var out []string
	if fl == nil {
		return out
	}
	for _, f := range fl.List {
		n := len(f.Names)
		if n == 0 {
			n = 1
		}
		for i := 0; i < n; i++ {
			out = append(out, coreType(f.Type))
		}
	}
	return out
}

// eval is the value of a constant integer expression (2 * 4, 1 + 2*4), or
// false.
func eval(e ast.Expr) (int64, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(x.Value, x.Kind, 0)
		n, ok := constant.Int64Val(v)
		return n, ok
	case *ast.ParenExpr:
		return eval(x.X)
	case *ast.BinaryExpr:
		a, ok1 := eval(x.X)
		b, ok2 := eval(x.Y)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch x.Op {
		case token.ADD:
			return a + b, true
		case token.MUL:
			return a * b, true
		}
	case *ast.CallExpr: // uintptr(8)
		if len(x.Args) == 1 {
			return eval(x.Args[0])
		}
	}
	return 0, false
}

// areaNames are the names of return areas in both sources.
var areaNames = map[string]bool{"returnArea": true, "exportReturnArea": true, "r": true}

// baseName is the variable at the root of a pointer expression:
// unsafe.Pointer(returnArea) is returnArea.
func baseName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name
		case *ast.CallExpr:
			if len(x.Args) != 1 {
				return ""
			}
			e = x.Args[0]
		case *ast.ParenExpr:
			e = x.X
		default:
			return ""
		}
	}
}

// offsets records what a function body reads and writes: in the
// generator's code unsafe.Add(unsafe.Pointer(BASE), OFF) and
// index*(STRIDE); in the glue stringAt/stringsAt/le32/le64/u8(BASE, OFF)
// and their writing twins putString/putStrings/put32/put64/put8,
// r[INDEX] and uintptr(i)*STRIDE.
func offsets(body ast.Node, f *abiFunc) {
	add := func(base string, off int64, width int64) {
		for o := off; o < off+width; o += 4 {
			if areaNames[base] {
				f.Area = append(f.Area, o)
			} else {
				f.Elem = append(f.Elem, o)
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			name := types.ExprString(x.Fun)
			switch {
			case name == "unsafe.Add" && len(x.Args) == 2:
				if off, ok := eval(x.Args[1]); ok {
					add(baseName(x.Args[0]), off, 1)
				} else if b, ok := x.Args[1].(*ast.BinaryExpr); ok && b.Op == token.MUL {
					if s, ok := eval(b.Y); ok {
						f.Strides = append(f.Strides, s)
					}
				}
			case (name == "stringAt" || name == "stringsAt" || name == "putString" || name == "putStrings") && len(x.Args) >= 2:
				if off, ok := eval(x.Args[1]); ok {
					add(baseName(x.Args[0]), off, 8)
				}
				if name == "stringsAt" || name == "putStrings" { // its elements: strings, 8 bytes apart
					add("", 0, 8)
					f.Strides = append(f.Strides, 8)
				}
			case (name == "le32" || name == "le64" || name == "u8" || name == "put32" || name == "put64" || name == "put8") && len(x.Args) >= 2:
				if off, ok := eval(x.Args[1]); ok {
					add(baseName(x.Args[0]), off, 1)
				}
			case name == "witRuntime.Allocate" && len(x.Args) == 3:
				if size, ok := eval(x.Args[1]); ok && f.AreaSize == 0 {
					f.AreaSize = size
				}
			}
		case *ast.IndexExpr: // r[3] in the glue's exports
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "r" {
				if i, ok := eval(x.Index); ok {
					f.Area = append(f.Area, 4*i)
				}
			}
		}
		return true
	})
}

func directive(doc *ast.CommentGroup) (kind, name string) {
	if doc == nil {
		return "", ""
	}
	for _, c := range doc.List {
		for _, k := range []string{"wasmimport", "wasmexport"} {
			if rest, ok := strings.CutPrefix(c.Text, "//go:"+k+" "); ok {
				if k == "wasmimport" {
					_, rest, _ = strings.Cut(rest, " ") // the module: nodestatus:plugin/host@0.1.1
				}
				return strings.TrimPrefix(k, "wasm"), rest
			}
		}
	}
	return "", ""
}

// extract reads the imports and exports of the Go files in paths. An
// import's offsets are those of the function that calls it; an export's
// those of its body and of the functions of these files that it calls
// (the glue's lowerResult, lowerList, lowerStreams).
func extract(t *testing.T, paths []string) abi {
	t.Helper()
	out := abi{}
	var funcs []*ast.FuncDecl
	imports := map[string]string{} // Go name -> key
	fset := token.NewFileSet()
	for _, p := range paths {
		file, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs = append(funcs, fd)
			kind, name := directive(fd.Doc)
			if kind == "" || name == "cabi_realloc" {
				continue
			}
			key := kind + " " + name
			f := &abiFunc{Params: fieldTypes(fd.Type.Params), Results: fieldTypes(fd.Type.Results)}
			out[key] = f
			if kind == "import" {
				imports[fd.Name.Name] = key
			}
		}
	}
	bodies := map[string]*ast.FuncDecl{}
	for _, fd := range funcs {
		if fd.Recv == nil && fd.Body != nil {
			bodies[fd.Name.Name] = fd
		}
	}
	for _, fd := range funcs {
		if kind, name := directive(fd.Doc); kind == "export" && name != "cabi_realloc" {
			f := out[kind+" "+name]
			offsets(fd.Body, f)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && bodies[id.Name] != nil && bodies[id.Name] != fd {
						offsets(bodies[id.Name].Body, f)
					}
				}
				return true
			})
		}
	}
	for _, fd := range funcs {
		if fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok {
					if key, ok := imports[id.Name]; ok {
						offsets(fd.Body, out[key])
					}
				}
			}
			return true
		})
	}
	for _, f := range out {
		for _, s := range []*[]int64{&f.Area, &f.Elem, &f.Strides} {
			*s = uniqueSorted(*s)
		}
	}
	return out
}

func uniqueSorted(v []int64) []int64 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	out := v[:0]
	for i, x := range v {
		if i == 0 || x != v[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// compare lists every difference between the glue's ABI and the
// generator's.
func compare(glue, gen abi, glueArea int64) []string {
	var diffs []string
	for key, g := range gen {
		m, ok := glue[key]
		if !ok {
			diffs = append(diffs, key+": missing from the glue")
			continue
		}
		if !reflect.DeepEqual(m.Params, g.Params) || !reflect.DeepEqual(m.Results, g.Results) {
			diffs = append(diffs, key+": signature "+strings.Join(m.Params, ",")+" -> "+strings.Join(m.Results, ",")+
				", the generator's "+strings.Join(g.Params, ",")+" -> "+strings.Join(g.Results, ","))
		}
		if !reflect.DeepEqual(m.Area, g.Area) {
			diffs = append(diffs, key+": return area offsets "+fmtInts(m.Area)+", the generator's "+fmtInts(g.Area))
		}
		if !reflect.DeepEqual(m.Elem, g.Elem) {
			diffs = append(diffs, key+": list element offsets "+fmtInts(m.Elem)+", the generator's "+fmtInts(g.Elem))
		}
		if !reflect.DeepEqual(m.Strides, g.Strides) {
			diffs = append(diffs, key+": list strides "+fmtInts(m.Strides)+", the generator's "+fmtInts(g.Strides))
		}
		if strings.HasPrefix(key, "import ") && g.AreaSize > glueArea {
			diffs = append(diffs, key+": the generator's return area is larger than the glue's")
		}
	}
	for key := range glue {
		if _, ok := gen[key]; !ok {
			diffs = append(diffs, key+": not in the generator's bindings")
		}
	}
	sort.Strings(diffs)
	return diffs
}

func fmtInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = constant.MakeInt64(x).String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// generated is the generator's Go files, from $NODESTATUS_WIT_BINDGEN_GO.
func generated(t *testing.T) []string {
	dir := os.Getenv("NODESTATUS_WIT_BINDGEN_GO")
	if dir == "" {
		t.Skip("NODESTATUS_WIT_BINDGEN_GO is not set: scripts/guests/go.sh runs wit-bindgen go and sets it")
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	return files
}

// glueArea is the size of the glue's import return area (importRet).
const glueArea = 9 * 8

// glueFiles are the glue of the world reactor-plugin, which includes
// plugin: the generator runs for it.
var glueFiles = []string{"abi_wasip1.go", "abi_reactor_wasip1.go"}

func TestGlueMatchesTheGeneratorsBindings(t *testing.T) {
	glue := extract(t, glueFiles)
	// The glue has every function of the world (8 imports, 4 exports and
	// their post-returns), each with offsets to compare.
	if len(glue) != 16 || len(glue["import system"].Area) == 0 || len(glue["export nodestatus:plugin/setter@0.2.1#set"].Area) == 0 ||
		len(glue["export nodestatus:plugin/reactor@0.2.1#subscribe"].Elem) == 0 || len(glue["export nodestatus:plugin/reactor@0.2.1#on-lines"].Strides) == 0 {
		t.Fatalf("the glue's ABI was not read: %+v", glue)
	}
	gen := extract(t, generated(t))
	if diffs := compare(glue, gen, glueArea); len(diffs) > 0 {
		t.Errorf("the glue differs from wit-bindgen's bindings of wit/:\n  %s", strings.Join(diffs, "\n  "))
	}
}

// The comparison finds a drift: a field moved in a record, a list's
// element grown (of an import's result and of an export's parameter), a
// function added.
func TestGlueComparisonFindsADrift(t *testing.T) {
	files := generated(t)
	dir := t.TempDir()
	var copies []string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		s = strings.Replace(s, "Cpus: uint32(*(*int32)(unsafe.Add(unsafe.Pointer(returnArea), (16 * 4))))",
			"Cpus: uint32(*(*int32)(unsafe.Add(unsafe.Pointer(returnArea), (17 * 4))))", 1)
		s = strings.Replace(s, "index*(5*4)", "index*(6*4)", 1)
		s = strings.Replace(s, "index*(16+4*4)", "index*(16+5*4)", 1)
		s = strings.Replace(s, "*(*int32)(unsafe.Add(unsafe.Pointer(base), (7 * 4))) = int32((element).Span)",
			"*(*int32)(unsafe.Add(unsafe.Pointer(base), (7 * 5))) = int32((element).Span)", 1)
		s = strings.Replace(s, "//go:wasmimport nodestatus:plugin/host@0.1.1 node-problems",
			"//go:wasmimport nodestatus:plugin/host@0.1.1 node-problems\nfunc wasm_import_x()\n\n//go:wasmimport nodestatus:plugin/host@0.1.1 added", 1)
		p := filepath.Join(dir, filepath.Base(filepath.Dir(f))+"-"+constant.MakeInt64(int64(i)).String()+".go")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, p)
	}
	diffs := strings.Join(compare(extract(t, glueFiles), extract(t, copies), glueArea), "\n")
	for _, want := range []string{"import system: return area offsets", "import network-interfaces: list strides", "import added: missing",
		"export nodestatus:plugin/reactor@0.2.1#on-lines: list strides", "export nodestatus:plugin/reactor@0.2.1#subscribe: list element offsets"} {
		if !strings.Contains(diffs, want) {
			t.Errorf("no %q in:\n%s", want, diffs)
		}
	}
}
