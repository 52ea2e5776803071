package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestE2EGCLimitUnlessTheUserTunedTheCollector(t *testing.T) {
	unset := func(string) string { return "" }
	for _, tt := range []struct {
		memory uint64
		limit  int64
	}{
		{memory: 24 << 30, limit: 1 << 30},
		{memory: 2 << 30, limit: 512 << 20},
		{memory: 0, limit: 0},
	} {
		if got := tuneGC(unset, tt.memory); got != tt.limit {
			t.Errorf("%d bytes of memory: e2e memory limit %d, want %d", tt.memory, got, tt.limit)
		}
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		limit := tuneGC(func(k string) string {
			if k == env {
				return "50"
			}
			return ""
		}, 24<<30)
		if limit != 0 {
			t.Errorf("%s set: e2e memory limit %d; the user's tuning must stand", env, limit)
		}
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
