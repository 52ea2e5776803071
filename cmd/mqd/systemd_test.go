package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/config"
)

// The units as the repository has them, with the mqd they run.
const (
	unitDir      = "../../deploy/systemd"
	installedMQD = "/usr/local/bin/mqd"
)

// TestSystemdUnitsVerify runs systemd-analyze verify on both units, run
// from a copy that names the mqd this test built (verify checks that
// ExecStart is executable); the template as the instance mqd@1.service.
// verify only warns about a directive it cannot parse, so any output fails
// the test too.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	for _, unit := range []string{"mqd.service", "mqd@.service"} {
		text, err := os.ReadFile(filepath.Join(unitDir, unit))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(text, []byte("ExecStart="+installedMQD+" ")) {
			t.Fatalf("%s: no ExecStart=%s", unit, installedMQD)
		}
		text = bytes.ReplaceAll(text, []byte(installedMQD), []byte(mqdBinary))
		if err := os.WriteFile(filepath.Join(dir, unit), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, unit := range []string{"mqd.service", "mqd@1.service"} {
		// --man=no: Documentation=man:mqd(8) is only there once installed.
		cmd := exec.Command(analyze, "verify", "--man=no", "./"+unit)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}

// TestUnitsAskForWhatMqdDoes checks the lines the rest of mq relies on:
// the notify protocol and watchdog mqd speaks, the directories the
// sandbox leaves writable, and a stop timeout longer than mqd's own
// shutdown bound.
func TestUnitsAskForWhatMqdDoes(t *testing.T) {
	for unit, want := range map[string][]string{
		"mqd.service":  {"Type=notify", "WatchdogSec=30s", "User=mq", "StateDirectory=mq", "RuntimeDirectory=mq", "--data-dir %S/mq", "MQ_SOCKET=%t/mq/mqd.sock", "ProtectSystem=strict", "Restart=on-failure", "TimeoutStopSec=90s"},
		"mqd@.service": {"Type=notify", "WatchdogSec=30s", "User=mq", "StateDirectory=mq/%i", "RuntimeDirectory=mq/%i", "--node-id %i", "--data-dir %S/mq/%i", "--config /etc/mq/mqd-%i.conf", "MQ_SOCKET=%t/mq/%i/mqd.sock", "ProtectSystem=strict", "Restart=on-failure", "TimeoutStopSec=90s"},
	} {
		text, err := os.ReadFile(filepath.Join(unitDir, unit))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !bytes.Contains(text, []byte(w)) {
				t.Errorf("%s lacks %q", unit, w)
			}
		}
	}
	// controlled.shutdown.timeout.ms (30s) plus shutdownGrace must fit.
	if shutdownGrace+30e9 > 90e9 {
		t.Errorf("TimeoutStopSec=90s is shorter than mqd's shutdown bound")
	}
}

// TestInstallSystemdStagesUnderDestdir runs install.sh --systemd into a
// temporary DESTDIR (never the real /etc), twice, then --uninstall.
func TestInstallSystemdStagesUnderDestdir(t *testing.T) {
	root, prebuilt := t.TempDir(), t.TempDir()
	// PREBUILT: this test's mqd, and stand-ins for the other programs.
	for _, d := range mustGlob(t, "../*/main.go") {
		p := filepath.Base(filepath.Dir(d))
		data := []byte("#!/bin/sh\n")
		if p == "mqd" {
			var err error
			if data, err = os.ReadFile(mqdBinary); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(prebuilt, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	install := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("../../install.sh", args...)
		cmd.Env = append(os.Environ(), "DESTDIR="+root, "PREFIX=/usr/local", "PREBUILT="+prebuilt)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	install("--systemd")
	first := tree(t, root)
	for _, f := range []string{"usr/local/bin/mqd", "usr/local/bin/mqctl", "usr/local/share/man/man8/mqd.8",
		"etc/systemd/system/mqd.service", "etc/systemd/system/mqd@.service", "etc/sysusers.d/mq.conf", "etc/mq/mqd.conf"} {
		if _, ok := first[f]; !ok {
			t.Errorf("install.sh --systemd did not install %s", f)
		}
	}
	if unit := first["etc/systemd/system/mqd.service"]; !strings.Contains(unit, "ExecStart=/usr/local/bin/mqd --config") {
		t.Errorf("installed mqd.service does not run /usr/local/bin/mqd")
	}
	// Idempotent: the same tree again; the operator's config is kept.
	install("--systemd")
	if again := tree(t, root); !sameTree(first, again) {
		t.Errorf("a second install.sh --systemd changed the tree")
	}
	conf := filepath.Join(root, "etc/mq/mqd.conf")
	if err := os.WriteFile(conf, []byte("num.partitions = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	install("--systemd")
	if data, _ := os.ReadFile(conf); string(data) != "num.partitions = 3\n" {
		t.Errorf("install.sh overwrote the operator's mqd.conf: %q", data)
	}
	install("--uninstall")
	left := tree(t, root)
	if len(left) != 1 || left["etc/mq/mqd.conf"] == "" {
		names := make([]string, 0, len(left))
		for n := range left {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("after --uninstall, want only the changed etc/mq/mqd.conf; left %v", names)
	}
}

func TestInstallHelpNamesSystemdAndUninstall(t *testing.T) {
	out, err := exec.Command("../../install.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(out))
	}
	for _, w := range []string{"--systemd", "--uninstall", "DESTDIR"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("install.sh --help does not mention %s:\n%s", w, out)
		}
	}
}

// tree maps each regular file under root to its contents.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameTree(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v", pattern, m)
	}
	return m
}

// The sample /etc/mq/mqd.conf loads, and so does every setting it shows
// commented out, once uncommented.
func TestSampleConfigLoadsWithItsExamplesUncommented(t *testing.T) {
	sample := filepath.Join(unitDir, "mqd.conf")
	if _, err := config.Load(sample, func(string) string { return "" }, nil); err != nil {
		t.Fatalf("the sample as installed: %v", err)
	}
	text, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, line := range strings.Split(string(text), "\n") {
		if body, ok := strings.CutPrefix(line, "#"); ok && strings.Contains(body, " = ") && !strings.HasPrefix(body, " ") {
			examples = append(examples, body)
		}
	}
	if len(examples) < 3 {
		t.Fatalf("found %d commented-out settings in the sample: %q", len(examples), examples)
	}
	uncommented := filepath.Join(t.TempDir(), "mqd.conf")
	if err := os.WriteFile(uncommented, []byte(strings.Join(examples, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(uncommented, func(string) string { return "" }, nil); err != nil {
		t.Errorf("the sample's examples: %v", err)
	}
}
