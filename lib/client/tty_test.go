package client

import (
	"os"
	"testing"
)

func TestIsTerminalIsFalseForPipesFilesAndDevNull(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, file := range map[string]*os.File{"pipe": w, "/dev/null": null, "file": f, "nil": nil} {
		if IsTerminal(file) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}
