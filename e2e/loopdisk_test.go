package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// loopDisk is an ext4 file system in an image file, mounted through a
// loop device: a node's data directory whose disk a test can fill or cut
// the power of. What the image file holds is what the loop device was
// given, i.e. what ext4 wrote back or fsynced; the node's writes still in
// ext4's page cache are not in it. A power loss is a copy of the image at
// the moment of the fault (powerLoss).
type loopDisk struct {
	t     testing.TB
	dir   string // holds the images; unique per disk and run
	image string // the image mounted now
	mount string // the mount point: the node's data directory
	gen   int    // images made so far (the first and every power loss)
}

// loopDisks numbers the disks of this process, for unique names.
var loopDisks atomic.Int64

// newLoopDisk makes an ext4 image of size bytes and mounts it; the test
// skips when it does not run as root. The file system and its images are
// gone when the test ends, also when it fails.
func newLoopDisk(t testing.TB, size int64) *loopDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop-device disks need root")
	}
	sweepStaleMounts()
	dir, err := os.MkdirTemp("", fmt.Sprintf("mq-e2e-disk-%d-%d-", os.Getpid(), loopDisks.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	d := &loopDisk{t: t, dir: dir, mount: filepath.Join(dir, "mnt")}
	t.Cleanup(d.remove)
	if err := os.Mkdir(d.mount, 0o755); err != nil {
		t.Fatal(err)
	}
	d.image = d.nextImage()
	f, err := os.OpenFile(d.image, os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		err = errors.Join(f.Truncate(size), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	// -m 0: no blocks reserved for root, so a ballast fills the disk for
	// mqd (root here) too.
	if err := runCmd("", "mkfs.ext4", "-q", "-F", "-m", "0", d.image); err != nil {
		t.Fatal(err)
	}
	if err := d.attach(); err != nil {
		t.Fatal(err)
	}
	return d
}

// nextImage names the next image file of the disk.
func (d *loopDisk) nextImage() string {
	d.gen++
	return filepath.Join(d.dir, fmt.Sprintf("disk-%d.img", d.gen))
}

// attach mounts the current image on the mount point through a loop
// device, which the kernel detaches again at umount (autoclear).
func (d *loopDisk) attach() error {
	return runCmd("", "mount", "-t", "ext4", "-o", "loop", d.image, d.mount)
}

// detach unmounts the file system; a mount that is gone already is no
// error.
func (d *loopDisk) detach() error {
	if !d.mounted() {
		return nil
	}
	return runCmd("", "umount", d.mount)
}

// mounted reports whether the mount point has a file system mounted.
func (d *loopDisk) mounted() bool {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == d.mount {
			return true
		}
	}
	return false
}

// snapshot copies the image as the loop device left it (no sync, no
// umount: the file system's dirty pages are not in it) to a new image
// file, and returns its name. Call it at the moment of the power loss,
// with the node's process gone.
func (d *loopDisk) snapshot() (string, error) {
	next := d.nextImage()
	// --sparse=always: the image's unused blocks stay holes, so a long
	// row's large disk copies only what ext4 wrote.
	return next, runCmd("", "cp", "--sparse=always", d.image, next)
}

// replace unmounts the current image (what the kernel writes back now
// goes to that image, which is then removed) and mounts image instead.
func (d *loopDisk) replace(image string) error {
	if err := d.detach(); err != nil {
		return err
	}
	if err := os.Remove(d.image); err != nil {
		return err
	}
	d.image = image
	return d.attach()
}

// remove unmounts the disk and removes its images.
func (d *loopDisk) remove() {
	if err := d.detach(); err != nil {
		d.t.Errorf("loop disk %s: %v", d.mount, err)
		return // leave the images of a mount still in place
	}
	if err := os.RemoveAll(d.dir); err != nil {
		d.t.Errorf("loop disk %s: %v", d.dir, err)
	}
}

// powerLoss cuts the power of nodes at once: each is SIGKILLed and its
// disk's image copied in the same moment, so what the file system had not
// written back is lost; then each mounts the copy as its data directory.
// The nodes are left down: start them (in the order the test needs).
// Every node must have a loop disk.
func (c *cluster) powerLoss(nodes ...*clusterNode) {
	c.t.Helper()
	var wg sync.WaitGroup
	for _, node := range nodes {
		if node.disk == nil {
			c.t.Fatalf("node %d has no loop disk to lose power on", node.id)
		}
		wg.Add(1)
		go func() { defer wg.Done(); node.kill() }()
	}
	wg.Wait()
	snaps := make([]string, len(nodes))
	errs := make([]error, len(nodes))
	for i, node := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); snaps[i], errs[i] = node.disk.snapshot() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
	for i, node := range nodes {
		if err := node.disk.replace(snaps[i]); err != nil {
			c.t.Fatalf("node %d: %v", node.id, err)
		}
	}
}
