package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

// A wrong partition reassign command line, or a malformed plan, is one
// line on stderr and exit 2, before any broker is asked (-b names none
// that listens).
func TestReassignRefusesBadUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`)
	dup := write("dup.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},{"topic":"t","partition":0,"replicas":[3]}]}`)
	twice := write("twice.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`)
	empty := write("empty.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"partition", "reassign"}, "give one of"},
		{[]string{"partition", "reassign", "--execute", good, "--verify", good}, "exclude each other"},
		{[]string{"partition", "reassign", "--generate", "-t", "t"}, "--brokers"},
		{[]string{"partition", "reassign", "--generate", "--brokers", "1,x", "-t", "t"}, "broker ids"},
		{[]string{"partition", "reassign", "--generate", "--brokers", "1,2"}, "missing TOPIC"},
		{[]string{"partition", "reassign", "--execute", good, "--throttle", "fast"}, "bytes per second"},
		{[]string{"partition", "reassign", "--verify", good, "--throttle", "1MB"}, "--throttle goes with --execute"},
		{[]string{"partition", "reassign", "--verify", good, "--watch"}, "--watch goes alone"},
		{[]string{"partition", "reassign", "--execute", dup}, "t:0 twice"},
		{[]string{"partition", "reassign", "--execute", twice}, "broker 1 is listed twice"},
		{[]string{"partition", "reassign", "--execute", empty}, "no replicas"},
		{[]string{"partition", "reassign", "--execute", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"partition", "reassign", "--cancel"}, "plan FILE or --topic"},
		{[]string{"partition", "reassign", "--cancel", good, "-t", "t"}, "not both"},
		{[]string{"cluster", "rebalance", "--throttle", "x"}, "bytes per second"},
		{[]string{"cluster", "rebalance", "--dry-run", "--no-wait"}, "--dry-run moves nothing"},
		{[]string{"cluster", "rebalance", "now"}, "unexpected argument"},
		{[]string{"broker", "decommission"}, "want one broker ID"},
		{[]string{"broker", "decommission", "x"}, "want a broker id"},
		{[]string{"broker", "decommission", "1", "--throttle", "0"}, "at least 1 byte"},
		{[]string{"broker", "describe", "1", "2"}, "unexpected argument"},
	} {
		app := newApp()
		var out, errOut bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errOut
		args := append([]string{"mqctl", "-b", "127.0.0.1:1"}, tc.args...)
		code := client.Run(app, args)
		if code != client.ExitUsage || out.Len() > 0 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
}
