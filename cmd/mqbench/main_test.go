package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestGCPercentUnlessGOGCIsSet(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	setGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Fatalf("GOGC unset: GC percent %d, want %d", got, gcPercent)
	}
	setGCPercent(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: GC percent changed to %d; the user's GOGC must stand", got)
	}
}

func TestProfilesAreWritten(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	stop, err := startProfiles(cpu, mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cpu, mem} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 0 {
			t.Fatalf("profile %s is empty", f)
		}
	}
	if _, err := startProfiles(filepath.Join(dir, "no", "such", "dir", "cpu"), ""); err == nil {
		t.Fatal("a CPU profile in a missing directory was accepted")
	}
}
