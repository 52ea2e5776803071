package controller

import (
	"bytes"
	"context"
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

// TestRPCsBeforeRaftStartsAreRetried: the RPC listener runs before Raft
// is started; a peer's request in between (one that took this node for
// the leader before it restarted) is told to retry elsewhere, not served
// by a Raft that is not there yet (mqd crashed on a nil *raft.Raft).
func TestRPCsBeforeRaftStartsAreRetried(t *testing.T) {
	c := &Controller{raftStarted: make(chan struct{}), voterList: []string{"1@a"}, closing: context.Background()}
	for _, op := range []string{opPropose, opHeartbeat, opElect, opJoin, opQuorum} {
		if _, err := c.handleRPC(&rpcRequest{Op: op, From: 2, Voters: []string{"1@a"}, TimeoutMillis: 1000}); !errors.Is(err, errRetry) {
			t.Errorf("%s before Raft starts: %v, want errRetry", op, err)
		}
	}
	if _, err := c.handleRPC(&rpcRequest{Op: opHello, From: 2, Voters: []string{"1@a"}}); err != nil {
		t.Errorf("hello before Raft starts: %v", err)
	}
}
