package controller

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// Every sentinel error of the package keeps its identity across the wire:
// wrapped on one node, errors.Is the same sentinel on the other, with the
// message unchanged.
func TestErrorsCrossTheWireAsTheirSentinels(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, s := range wireErrors {
		named["Err"+s.name] = true
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") && !named[n.Name] {
							t.Errorf("%s is not in wireErrors", n.Name)
						}
					}
				}
			}
		}
	}
	for _, s := range wireErrors {
		sent := fmt.Errorf("topic %q: %w", "x", s.err)
		var buf bytes.Buffer
		if err := writeMessage(&buf, encodeError(sent)); err != nil {
			t.Fatal(err)
		}
		var w wireError
		if err := readMessage(&buf, &w); err != nil {
			t.Fatal(err)
		}
		got := decodeError(&w)
		if !errors.Is(got, s.err) || got.Error() != sent.Error() {
			t.Errorf("%s: sent %q, got %q (is %v)", s.name, sent, got, errors.Is(got, s.err))
		}
	}
	if got := decodeError(encodeError(errors.New("something else"))); got == nil || got.Error() != "something else" {
		t.Errorf("plain error came back as %v", got)
	}
	if decodeError(encodeError(nil)) != nil {
		t.Error("nil error came back non-nil")
	}
}
