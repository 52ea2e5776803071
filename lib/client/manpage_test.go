package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestCheckManPageFindsStalePagesAndRewritesThem(t *testing.T) {
	app := &cli.App{Name: "demo", Usage: "shows things", Flags: []cli.Flag{&cli.StringFlag{Name: "color", Usage: "paint in `COLOR`"}}}
	path := filepath.Join(t.TempDir(), "demo.1")
	if err := CheckManPage(app, 1, path, false); err == nil || !strings.Contains(err.Error(), "make man") {
		t.Fatalf("missing page: %v, want an error that says to run make man", err)
	}
	if err := CheckManPage(app, 1, path, true); err != nil {
		t.Fatal(err)
	}
	if err := CheckManPage(app, 1, path, false); err != nil {
		t.Fatalf("page just written: %v", err)
	}
	app.Flags = append(app.Flags, &cli.BoolFlag{Name: "loud"})
	if err := CheckManPage(app, 1, path, false); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("page after adding a flag: %v, want stale", err)
	}
	page, _ := os.ReadFile(path)
	if !strings.Contains(string(page), "color") {
		t.Fatalf("page lacks the flag:\n%s", page)
	}
}

func TestCheckManPageAppendsExtraSections(t *testing.T) {
	app := &cli.App{Name: "demo", Usage: "shows things"}
	path := filepath.Join(t.TempDir(), "demo.8")
	extra := "\n\n.SH SETTINGS\n.TP\n\\fBcolor\\fR (dynamic)\nWhat to paint with.\n"
	if err := CheckManPage(app, 8, path, true, extra); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(page), extra) {
		t.Fatalf("page does not end with the extra section:\n%s", page)
	}
	if err := CheckManPage(app, 8, path, false); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("page checked without its extra section: %v, want stale", err)
	}
}
