package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// A test process that is killed (a timeout's panic, SIGKILL) runs no
// t.Cleanup, so its network namespaces and loop mounts outlive it. Their
// names carry the pid of the process that made them; the first netns
// cluster or loop disk of a run removes those of processes that are gone.

var (
	sweepNetsOnce   sync.Once
	sweepMountsOnce sync.Once
)

// staleNetns matches a testNet's namespace names: "mq<pid>-<run>-…".
var staleNetns = regexp.MustCompile(`^mq(\d+)-\d+-`)

// staleMount matches a loopDisk's mount point: "…/mq-e2e-disk-<pid>-<n>-…/mnt".
var staleMount = regexp.MustCompile(`/mq-e2e-disk-(\d+)-\d+-[^/]*/mnt$`)

// gone reports whether no process has pid.
func gone(pid string) bool {
	_, err := os.Stat("/proc/" + pid)
	return os.IsNotExist(err)
}

// sweepStaleNets deletes the namespaces of earlier test processes that
// are gone (their veths and nft rules go with them).
func sweepStaleNets() {
	sweepNetsOnce.Do(func() {
		out, err := exec.Command("ip", "netns", "list").Output()
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(line, " ")
			if m := staleNetns.FindStringSubmatch(name); m != nil && m[1] != strconv.Itoa(os.Getpid()) && gone(m[1]) {
				runCmd("", "ip", "netns", "del", name) // best effort: another sweeper may be first
			}
		}
	})
}

// sweepStaleMounts unmounts the loop disks of earlier test processes
// that are gone (a loop mount's device is detached with it) and removes
// their directories.
func sweepStaleMounts() {
	sweepMountsOnce.Do(func() {
		data, err := os.ReadFile("/proc/self/mounts")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			if m := staleMount.FindStringSubmatch(f[1]); m != nil && m[1] != strconv.Itoa(os.Getpid()) && gone(m[1]) {
				if runCmd("", "umount", "-l", f[1]) == nil {
					os.RemoveAll(strings.TrimSuffix(f[1], "/mnt"))
				}
			}
		}
	})
}
