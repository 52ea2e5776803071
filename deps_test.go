package mq

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mqproject/mq/"

// allowed lists, for each package of ours, which of our packages it may
// import directly: the graph as built (docs/ARCHITECTURE.md), no wider.
// Dependencies point downward only. A package missing here fails the test,
// so every new one states its place, and a new edge is a change to this
// table, made on purpose.
var allowed = map[string][]string{
	"lib/record":            {},
	"lib/config":            {},
	"lib/server":            {"lib/auth"},
	"lib/auth":              {},
	"lib/kafkaext":          {},
	"lib/version":           {},
	"lib/clock":             {},
	"lib/loopback":          {},
	"lib/mqtest":            {"lib/loopback"},
	"lib/mqtest/dd":         {},
	"lib/vfs":               {},
	"lib/probe":             {},
	"lib/controller":        {"lib/auth", "lib/clock", "lib/probe"},
	"lib/log":               {"lib/clock", "lib/record", "lib/vfs"},
	"lib/replica":           {"lib/clock", "lib/log", "lib/record"},
	"lib/peer":              {"lib/clock", "lib/probe", "lib/replica", "lib/kafkaext", "lib/txn"},
	"lib/coordinator/owned": {},
	"lib/group":             {"lib/clock", "lib/coordinator/owned", "lib/record"},
	"lib/queue":             {"lib/clock", "lib/record"},
	"lib/txn":               {"lib/clock", "lib/coordinator/owned", "lib/record"},
	"lib/coordinator":       {"lib/clock", "lib/config", "lib/controller", "lib/group", "lib/kafkaext", "lib/partition", "lib/peer", "lib/queue", "lib/record", "lib/replica", "lib/txn"},
	"lib/metrics":           {"lib/server"},
	"lib/tier":              {"lib/clock", "lib/controller", "lib/log", "lib/record"},
	"lib/partition":         {"lib/clock", "lib/config", "lib/controller", "lib/kafkaext", "lib/log", "lib/peer", "lib/replica", "lib/tier", "lib/vfs"},
	"lib/broker":            {"lib/auth", "lib/clock", "lib/config", "lib/controller", "lib/coordinator", "lib/group", "lib/kafkaext", "lib/log", "lib/partition", "lib/peer", "lib/queue", "lib/record", "lib/replica", "lib/server", "lib/tier", "lib/txn", "lib/version"},
	"lib/node":              {"lib/auth", "lib/broker", "lib/clock", "lib/config", "lib/controller", "lib/coordinator", "lib/kafkaext", "lib/metrics", "lib/partition", "lib/peer", "lib/record", "lib/replica", "lib/server", "lib/tier", "lib/vfs"},
	"lib/client":            {"lib/config", "lib/kafkaext"},
	"lib/pipe":              {"lib/client", "lib/kafkaext", "lib/record"},
	"lib/tail":              {"lib/admin", "lib/client"},
	"lib/bench":             {"lib/client"},
	"lib/admin":             {"lib/client", "lib/kafkaext"},
	"cmd/mqd":               {"lib/node", "lib/client", "lib/config", "lib/version"},
	"cmd/mqctl":             {"lib/client", "lib/admin", "lib/version"},
	"cmd/mqpipe":            {"lib/client", "lib/pipe", "lib/version"},
	"cmd/mqtail":            {"lib/client", "lib/tail", "lib/version"},
	"cmd/mqbench":           {"lib/client", "lib/bench", "lib/version"},
	"e2e":                   {"lib/record"},
	"lib/vfs/faultfs":       {"lib/vfs"},
	"lib/vfs/crashfs":       {"lib/vfs"},
}

// allowedInTests lists what a package's tests may import of ours beyond
// what the package itself may (fixtures built with a lower package).
// Tests keep the direction too.
var allowedInTests = map[string][]string{
	// Listener addresses below the ephemeral range, for tests that start
	// daemons on ports of their own (lib/loopback); storage on file
	// systems that fail on command (faultfs) or lose power (crashfs).
	"lib/broker":     {"lib/mqtest", "lib/vfs", "lib/vfs/faultfs"},
	"lib/node":       {"lib/loopback", "lib/mqtest", "lib/record", "lib/replica", "lib/vfs/crashfs"},
	"lib/controller": {"lib/loopback", "lib/mqtest", "lib/mqtest/dd"},
	"lib/partition":  {"lib/loopback", "lib/mqtest", "lib/record"},
	"e2e":            {"lib/loopback", "lib/mqtest"},
	// Test support shared by every package's tests (mqtest.WaitFor).
	"lib/server": {"lib/mqtest"},
	"lib/pipe":   {"lib/mqtest"},
	"lib/peer":   {"lib/mqtest"},
	"lib/tier":   {"lib/mqtest"},
	// A throwaway CA (mqtest.NewCA), for the brokers' TLS between them.
	"lib/coordinator": {"lib/mqtest"},
	// A pseudo-terminal, for what a tool does when it writes to one, or
	// reads a person's answer from one.
	"lib/client":  {"lib/mqtest"},
	"cmd/mqbench": {"lib/mqtest"},
	"cmd/mqctl":   {"lib/mqtest"},
	// Test support shared by every package's tests (lib/mqtest: WaitFor,
	// the in-process Cluster); listener addresses below the ephemeral
	// range, for tests that start daemons on ports of their own
	// (lib/loopback); storage on file systems that fail on command
	// (faultfs) or lose power (crashfs).
	// Logs opened on a file system the test controls.
	"lib/replica": {"lib/mqtest/dd", "lib/vfs", "lib/vfs/crashfs", "lib/vfs/faultfs"},
	// The one data-driven runner (lib/mqtest/dd).
	"lib/group": {"lib/mqtest/dd"},
	"lib/txn":   {"lib/mqtest/dd"},
	"lib/log":   {"lib/mqtest", "lib/vfs/faultfs", "lib/vfs/crashfs"},
}

// testOnly are the packages that only tests may import: no package of
// ours imports them, whatever its place in the table.
var testOnly = []string{"lib/mqtest", "lib/mqtest/dd"}

// serverSide are the packages that only mqd may link.
var serverSide = []string{"lib/auth", "lib/clock", "lib/probe", "lib/log", "lib/replica", "lib/peer", "lib/partition", "lib/coordinator", "lib/coordinator/owned", "lib/controller", "lib/group", "lib/queue", "lib/txn", "lib/server", "lib/broker", "lib/node", "lib/metrics", "lib/vfs", "lib/vfs/faultfs", "lib/vfs/crashfs", "lib/tier"}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// TestDependencyDirection keeps the layering of docs/ARCHITECTURE.md: each
// package and its tests import only the packages below it, the client
// tools never link server code, not even transitively, and the test-only
// packages are imported by tests alone.
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
			if ours && contains(testOnly, dep) {
				t.Errorf("%s imports %s, which only tests may import", name, dep)
			} else if ours && !contains(may, dep) {
				t.Errorf("%s imports %s, which is not below it", name, dep)
			}
		}
		mayInTests := append(append([]string{name}, may...), allowedInTests[name]...)
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			dep, ours := strings.CutPrefix(imp, module)
			if ours && !contains(mayInTests, dep) {
				t.Errorf("%s's tests import %s, which is not below it (allowedInTests)", name, dep)
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

// TestNothingReferencesFilesOutsideTheRepository: the design notes the
// project started from live outside it; code, docs and tests must say what
// they need themselves (docs/ARCHITECTURE.md) and never point there.
func TestNothingReferencesFilesOutsideTheRepository(t *testing.T) {
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	outside := []string{"DESIGN" + ".md", "STYLE" + ".md", "../" + "shared"}
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, "man/") || strings.HasPrefix(name, "testdata/fuzz") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			continue // deleted in the work tree
		}
		for _, o := range outside {
			if strings.Contains(string(b), o) {
				t.Errorf("%s refers to %s, outside the repository", name, o)
			}
		}
	}
}
