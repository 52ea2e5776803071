package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

var updateMan = flag.Bool("update-man", false, "rewrite the man page from the cli definitions (make man)")

// TestManPageCurrent fails when man/mqd.8 differs from what the cli
// definitions and lib/config's settings generate; make man rewrites it.
func TestManPageCurrent(t *testing.T) {
	page := filepath.Join("..", "..", "man", "mqd.8")
	if err := client.CheckManPage(newApp(), 8, page, *updateMan, settingsManPage()); err != nil {
		t.Fatal(err)
	}
}
