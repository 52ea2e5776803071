package client

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// CheckManPage compares the man page that app's definitions generate (in
// the given section) with the committed file at path and says how to
// refresh it when they differ; with update it rewrites the file instead.
// Every program's TestManPageCurrent calls it, and `make man` runs those
// tests with -update-man. Each of extra is roff appended to the page, a
// section of its own (mqd's BROKER SETTINGS).
func CheckManPage(app *cli.App, section int, path string, update bool, extra ...string) error {
	want, err := ManPage(app, section)
	if err != nil {
		return err
	}
	for _, e := range extra {
		want += e
	}
	if update {
		return os.WriteFile(path, []byte(want), 0o644)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w (run make man)", err)
	}
	if string(got) != want {
		return fmt.Errorf("%s is stale: run make man", path)
	}
	return nil
}

// ManPage is app's man page in roff: urfave/cli's, with every command's
// synopsis filled in (FillSynopses) and a SYNOPSIS section that lists them
// (Synopses) instead of urfave/cli's list of every flag.
func ManPage(app *cli.App, section int) (string, error) {
	addVerboseFlags(app)
	FillSynopses(app)
	page, err := app.ToManWithSection(section)
	if err != nil {
		return "", fmt.Errorf("generate man page: %w", err)
	}
	const head = ".SH SYNOPSIS\n"
	start := strings.Index(page, head)
	if start < 0 {
		return page, nil
	}
	end := strings.Index(page[start+len(head):], "\n.SH ")
	if end < 0 {
		return page, nil
	}
	end += start + len(head) + 1
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(".ad l\n")
	for _, line := range Synopses(app) {
		b.WriteString(".PP\n.in +4n\n.ti -4n\n")
		b.WriteString(roffSynopsis(line))
		b.WriteString("\n.in\n")
	}
	b.WriteString(".ad b\n\n")
	return page[:start] + b.String() + page[end:], nil
}

// roffSynopsis is one synopsis line in roff: hyphens as \- (so that a
// pasted flag is ASCII), no breaks at hyphens (\%), and unbreakable spaces
// inside [...] and between a flag and its value, so that lines break only
// between options.
func roffSynopsis(line string) string {
	var b strings.Builder
	depth := 0
	words := strings.Fields(line)
	for i, w := range words {
		glued := false
		if i > 0 {
			prev := words[i-1]
			glued = depth > 0 || (strings.HasPrefix(prev, "-") && w != "" && w[0] >= 'A' && w[0] <= 'Z')
			if glued {
				b.WriteString(`\ `)
			} else {
				b.WriteString(" ")
			}
		}
		if !glued {
			b.WriteString(`\%`)
		}
		for _, r := range w {
			switch r {
			case '[', '(':
				depth++
			case ']', ')':
				depth--
			}
			switch r {
			case '-':
				b.WriteString(`\-`)
			case '\\':
				b.WriteString(`\e`)
			default:
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}
