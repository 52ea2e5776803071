package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

var updateMan = flag.Bool("update-man", false, "rewrite the man page from the cli definitions (make man)")

// TestManPageCurrent fails when man/mqtail.1 differs from what the cli
// definitions generate; make man rewrites it.
func TestManPageCurrent(t *testing.T) {
	page := filepath.Join("..", "..", "man", "mqtail.1")
	if err := client.CheckManPage(newApp(), 1, page, *updateMan); err != nil {
		t.Fatal(err)
	}
}
