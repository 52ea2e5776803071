package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolvePrefersTheStampThenTheModuleVersion(t *testing.T) {
	tagged := &debug.BuildInfo{Main: debug.Module{Path: "github.com/mqproject/mq", Version: "v0.4.0"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20250101120000-abcdef123456+dirty"}}
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	revision := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}
	vcs := &debug.BuildInfo{Main: devel.Main, Settings: []debug.BuildSetting{revision, {Key: "vcs.modified", Value: "false"}}}
	vcsDirty := &debug.BuildInfo{Main: devel.Main, Settings: []debug.BuildSetting{revision, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name  string
		stamp string
		info  *debug.BuildInfo
		want  string
	}{
		{"stamp wins", "v0.5.0-3-gabc1234", tagged, "v0.5.0-3-gabc1234"},
		{"go install of a tag", "", tagged, "v0.4.0"},
		{"go build in a checkout", "", checkout, "v0.0.0-20250101120000-abcdef123456+dirty"},
		{"go build with VCS information", "", vcs, "dev-0123456789ab"},
		{"go build of a modified checkout", "", vcsDirty, "dev-0123456789ab-dirty"},
		{"go test or go run", "", devel, "dev"},
		{"no build info", "", nil, "dev"},
		{"empty module version", "", &debug.BuildInfo{}, "dev"},
	} {
		if got := resolve(c.stamp, c.info); got != c.want {
			t.Errorf("%s: resolve = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestBuildScriptsStampString builds a program with the linker flag that
// the Makefile and install.sh pass and checks that String returns the
// stamp: a renamed variable or a typo in either script would leave every
// release reporting the toolchain's version.
func TestBuildScriptsStampString(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	flag := regexp.MustCompile(`-X (\S+)=\$`)
	var symbol string
	for _, script := range []string{"Makefile", "install.sh"} {
		text, err := os.ReadFile(filepath.Join("..", "..", script))
		if err != nil {
			t.Fatal(err)
		}
		m := flag.FindSubmatch(text)
		if m == nil {
			t.Fatalf("%s passes no -X …=$VERSION linker flag", script)
		}
		if symbol != "" && string(m[1]) != symbol {
			t.Fatalf("%s stamps %s, the Makefile %s", script, m[1], symbol)
		}
		symbol = string(m[1])
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-ldflags", "-X "+symbol+"=v9.8.7-test", "-o", bin, "./testdata/printversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "v9.8.7-test" {
		t.Fatalf("stamped program reports %q, want v9.8.7-test (the -X flag names %s)", got, symbol)
	}
}

// TestBuildScriptsStampACheckoutWithoutATag: make build and install.sh
// stamp what git describe prints, which is nothing in a checkout without
// a tag unless it falls back to the commit (--always); the programs then
// reported "dev", naming no commit.
func TestBuildScriptsStampACheckoutWithoutATag(t *testing.T) {
	describe := regexp.MustCompile(`git describe[^)]*`)
	for _, script := range []string{"Makefile", "install.sh"} {
		text, err := os.ReadFile(filepath.Join("..", "..", script))
		if err != nil {
			t.Fatal(err)
		}
		cmd := describe.Find(text)
		if cmd == nil {
			t.Fatalf("%s runs no git describe", script)
		}
		if !strings.Contains(string(cmd), "--always") {
			t.Errorf("%s runs %q: a checkout without a tag gets no version", script, cmd)
		}
	}
}
