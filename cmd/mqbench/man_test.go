package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateMan = flag.Bool("update-man", false, "rewrite man/mqbench.1 from the cli definitions")

// manPage is the committed man page, relative to this package.
var manPage = filepath.Join("..", "..", "man", "mqbench.1")

// TestManPageCurrent fails when man/mqbench.1 differs from what the cli
// definitions generate; `go test ./cmd/mqbench -run TestManPageCurrent
// -update-man` (make man) rewrites it.
func TestManPageCurrent(t *testing.T) {
	want, err := newApp().ToManWithSection(1)
	if err != nil {
		t.Fatal(err)
	}
	if *updateMan {
		if err := os.WriteFile(manPage, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatalf("%v (run make man)", err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: run make man (go test ./cmd/mqbench -run TestManPageCurrent -update-man)", manPage)
	}
}
