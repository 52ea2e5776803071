package client

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// CheckManPage compares the man page that app's definitions generate (in
// the given section) with the committed file at path and says how to
// refresh it when they differ; with update it rewrites the file instead.
// Every program's TestManPageCurrent calls it, and `make man` runs those
// tests with -update-man. Each of extra is roff appended to the page, a
// section of its own (mqd's BROKER SETTINGS).
func CheckManPage(app *cli.App, section int, path string, update bool, extra ...string) error {
	want, err := app.ToManWithSection(section)
	if err != nil {
		return fmt.Errorf("generate man page: %w", err)
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
