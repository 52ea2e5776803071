package mq

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mqproject/mq/"

// allowed lists, for each package of ours, which of our packages it may
// import directly. Dependencies point downward only (DESIGN.md); a package
// missing here fails the test so that every new one states its place.
var allowed = map[string][]string{
	"lib/record":     {},
	"lib/config":     {},
	"lib/server":     {},
	"lib/kafkaext":   {},
	"lib/version":    {},
	"lib/log":        {"lib/record"},
	"lib/replica":    {"lib/log", "lib/record"},
	"lib/controller": {"lib/record", "lib/log"},
	"lib/group":      {"lib/record", "lib/log", "lib/replica", "lib/controller", "lib/config"},
	"lib/broker":     {"lib/record", "lib/log", "lib/replica", "lib/controller", "lib/group", "lib/config", "lib/server", "lib/kafkaext", "lib/version"},
	"lib/client":     {"lib/config", "lib/record", "lib/kafkaext"},
	"lib/pipe":       {"lib/client", "lib/config", "lib/record", "lib/kafkaext"},
	"lib/tail":       {"lib/client", "lib/config"},
	"lib/bench":      {"lib/client", "lib/config", "lib/record"},
	"lib/admin":      {"lib/client", "lib/config", "lib/kafkaext"},
	"cmd/mqd":        {"lib/broker", "lib/config", "lib/controller", "lib/server", "lib/log", "lib/record", "lib/replica", "lib/group", "lib/version"},
	"cmd/mqctl":      {"lib/client", "lib/config", "lib/admin", "lib/version"},
	"cmd/mqpipe":     {"lib/client", "lib/config", "lib/pipe", "lib/record", "lib/version"},
	"cmd/mqtail":     {"lib/client", "lib/config", "lib/tail"},
	"cmd/mqbench":    {"lib/client", "lib/config", "lib/bench", "lib/version"},
	"e2e":            {"lib/record"},
}

// serverSide are the packages that only mqd may link.
var serverSide = []string{"lib/log", "lib/replica", "lib/controller", "lib/group", "lib/server", "lib/broker"}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestDependencyDirection keeps the layering of DESIGN.md: each package
// imports only the packages below it, and the client tools never link
// server code, not even transitively.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue // the root package
		}
		may, known := allowed[name]
		if !known {
			t.Errorf("%s: not in the dependency table of deps_test.go; add it with the packages it may import", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if ours && !contains(may, dep) {
				t.Errorf("%s imports %s, which is not below it", name, dep)
			}
		}
		if strings.HasPrefix(name, "cmd/") && name != "cmd/mqd" || strings.HasPrefix(name, "lib/client") {
			for _, d := range p.Deps {
				dep, ours := strings.CutPrefix(d, module)
				if ours && contains(serverSide, dep) {
					t.Errorf("%s links server package %s", name, dep)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
