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

// TestManPageSynopsisReadsLikeAManPage: the SYNOPSIS lists each command
// with its flags, required ones bare and the others in brackets, instead
// of urfave/cli's "[--flag]=[value]" list; a written synopsis is kept.
func TestManPageSynopsisReadsLikeAManPage(t *testing.T) {
	app := &cli.App{Name: "demo", Flags: []cli.Flag{&cli.StringFlag{Name: "broker", Aliases: []string{"b"}, Usage: "`ADDR`"}},
		Commands: []*cli.Command{
			{Name: "consume", ArgsUsage: "[FILE...]", Action: func(*cli.Context) error { return nil }, Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "read `TOPIC`", Required: true},
				&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "join `GROUP`"},
				&cli.DurationFlag{Name: "linger"},
				&cli.BoolFlag{Name: "exit", Aliases: []string{"e"}},
				&cli.BoolFlag{Name: "secret", Hidden: true},
			}},
			{Name: "topic", Subcommands: []*cli.Command{
				{Name: "create", UsageText: "demo topic create [-p N] TOPIC...\n\nCreates topics.", Action: func(*cli.Context) error { return nil }},
			}},
		}}
	page, err := ManPage(app, 1)
	if err != nil {
		t.Fatal(err)
	}
	syn := page[strings.Index(page, ".SH SYNOPSIS"):]
	syn = syn[:strings.Index(syn[1:], "\n.SH ")+1]
	for _, want := range []string{
		`\%demo \%consume \%\-t\ TOPIC... \%[\-g\ GROUP] \%[\-\-linger\ DURATION] \%[\-e] \%[FILE...]`,
		`\%demo \%topic \%create \%[\-p\ N] \%TOPIC...`,
	} {
		if !strings.Contains(syn, want) {
			t.Errorf("SYNOPSIS lacks %q:\n%s", want, syn)
		}
	}
	for _, bad := range []string{"[value]", "secret", "Creates topics"} {
		if strings.Contains(syn, bad) {
			t.Errorf("SYNOPSIS has %q:\n%s", bad, syn)
		}
	}
	// the generated synopsis is the command's usage in --help too
	if got := app.Commands[0].UsageText; got != "demo consume -t TOPIC... [-g GROUP] [--linger DURATION] [-e] [FILE...]" {
		t.Errorf("consume's UsageText = %q", got)
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
