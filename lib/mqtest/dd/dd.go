// Package dd is the one runner of mq's data-driven tests, for tests only:
// the scripts of lib/controller, lib/group, lib/replica and lib/txn
// (testdata/*.txt) run through github.com/cockroachdb/datadriven, as
// etcd-raft's and pebble's do. A script is a sequence of cases, each one
// command and what it prints, separated by blank lines:
//
//	# what the case shows
//	<command> [key=value | key=(value,value,...) | word]...
//	<input, for the commands that take one>
//	----
//	<expected output>
//
// go test -rewrite (datadriven's flag) writes what the code prints as the
// expected output: rewrite only when you understand the diff. Arguments
// with a value are read with datadriven's ScanArgs and MaybeScanArgs;
// the words without one (labels, partitions, durations) with Words and
// the helpers here.
package dd

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Runner runs one case of a script and returns what it prints.
type Runner func(t *testing.T, d *datadriven.TestData) string

// Run runs each script dir/*.txt as a subtest named for the file
// (without .txt), the cases of a script in order against one runner that
// start makes for it; start registers the runner's clean-up with
// t.Cleanup. Subdirectories (a fuzz corpus) are not scripts. No script
// fails the test.
func Run(t *testing.T, dir string, start func(t *testing.T) Runner) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			datadriven.RunTest(t, file, start(t))
		})
	}
}

// Words are a command's arguments without a value, in order.
func Words(d *datadriven.TestData) []string {
	var w []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			w = append(w, a.Key)
		}
	}
	return w
}

// FirstWord is the command's first argument without a value (its label,
// duration, or the like), which it must have.
func FirstWord(t testing.TB, d *datadriven.TestData) string {
	t.Helper()
	w := Words(d)
	if len(w) == 0 {
		d.Fatalf(t, "%s needs an argument", d.Cmd)
	}
	return w[0]
}

// Duration is the command's first word as a duration ("tick 30s").
func Duration(t testing.TB, d *datadriven.TestData) time.Duration {
	t.Helper()
	s := FirstWord(t, d)
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", s, err)
	}
	return dur
}

// TopicPartition parses a word TOPIC<sep>PARTITION ("t/0", "t-0"), cut
// at the last sep.
func TopicPartition(t testing.TB, d *datadriven.TestData, word, sep string) (string, int32) {
	t.Helper()
	i := strings.LastIndex(word, sep)
	if i < 0 {
		d.Fatalf(t, "%s: not TOPIC%sPARTITION", word, sep)
	}
	n, err := strconv.ParseInt(word[i+len(sep):], 10, 32)
	if err != nil {
		d.Fatalf(t, "%s: %v", word, err)
	}
	return word[:i], int32(n)
}
