package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// TestMetaPropertiesSurvivePowerLoss: once checkMeta returned, the node
// and cluster it recorded are there after a power loss, and a directory
// of another node or cluster is refused.
func TestMetaPropertiesSurvivePowerLoss(t *testing.T) {
	fs := crashfs.New(crashfs.Strict, 1)
	if err := vfs.MkdirAllDurable(fs, "/data", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := checkMeta(fs, "/data", 1, ""); err != nil {
		t.Fatal(err)
	}
	fs = fs.Crash()
	refused := func(err error, want string) {
		t.Helper()
		var cerr *ConfigError
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), want) {
			t.Fatalf("checkMeta: %v, want a ConfigError saying %q", err, want)
		}
	}
	refused(checkMeta(fs, "/data", 2, ""), "belongs to node 1")
	if err := checkMeta(fs, "/data", 1, "c1"); err != nil {
		t.Fatal(err)
	}
	fs = fs.Crash()
	refused(checkMeta(fs, "/data", 1, "c2"), "belongs to cluster c1")
	if err := checkMeta(fs, "/data", 1, "c1"); err != nil {
		t.Fatalf("checkMeta of the recorded node and cluster: %v", err)
	}
}
