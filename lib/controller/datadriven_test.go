package controller

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt with what the code produces")

// TestDataDriven runs the scripts testdata/*.txt against a bare FSM. A
// script is a sequence of cases separated by blank lines:
//
//	<input lines>
//	----
//	<expected output lines>
//
// An input line is "Name[@version] {json body}", a record of the command
// named Name (commandType.String) applied at the next log index, printing
// "ok" or the error; or "image", printing the current image.
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

func runScript(t *testing.T, file string) {
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tf := newTestFSM(t)
	var out strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(content)), "\n\n")
	for i, block := range blocks {
		input, want, found := strings.Cut(block, "----\n")
		if !found {
			input, want, found = strings.Cut(block, "----")
		}
		if !found {
			t.Fatalf("%s: case %d has no ---- line", file, i+1)
		}
		var got strings.Builder
		for line := range strings.SplitSeq(strings.TrimSpace(input), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			got.WriteString(runLine(t, tf, line))
		}
		if *rewrite {
			fmt.Fprintf(&out, "%s\n----\n%s\n", strings.TrimRight(input, "\n"), strings.TrimRight(got.String(), "\n"))
			if i < len(blocks)-1 {
				out.WriteString("\n")
			}
			continue
		}
		if strings.TrimSpace(got.String()) != strings.TrimSpace(want) {
			t.Errorf("%s: case %d:\n%s\ngot:\n%s\nwant:\n%s", file, i+1, strings.TrimSpace(input), got.String(), want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runLine(t *testing.T, tf *testFSM, line string) string {
	if line == "image" {
		return renderImage(tf.f.Image())
	}
	head, body, _ := strings.Cut(line, " ")
	name, versionText, hasVersion := strings.Cut(head, "@")
	version := 1
	if hasVersion {
		v, err := strconv.Atoi(versionText)
		if err != nil {
			t.Fatalf("bad version in %q", line)
		}
		version = v
	}
	typ, ok := commandNamed(name)
	if !ok {
		t.Fatalf("unknown command %q", name)
	}
	res := tf.apply(append([]byte{byte(typ), byte(version)}, body...))
	switch {
	case res.err != nil:
		return "error: " + res.err.Error() + "\n"
	case typ == cmdAllocateProducerID:
		return fmt.Sprintf("ok first=%d\n", res.firstProducerID)
	}
	return "ok\n"
}

func commandNamed(name string) (commandType, bool) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < 256 {
		return commandType(n), true
	}
	for t := range commandType(255) {
		if t.String() == name {
			return t, true
		}
	}
	return 0, false
}

// renderImage prints an image as stable text.
func renderImage(img *Image) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version=%d cluster=%s controller=%d next-producer-id=%d\n", img.Version, img.ClusterID, img.ControllerID, img.NextProducerID)
	for _, id := range sortedKeys(img.Brokers) {
		br := img.Brokers[id]
		rack := ""
		if br.Rack != nil {
			rack = " rack=" + *br.Rack
		}
		fmt.Fprintf(&b, "broker %d %s:%d epoch=%d%s listeners=%v\n", br.ID, br.Host, br.Port, br.Epoch, rack, br.Listeners)
	}
	for _, id := range sortedKeys(img.BrokerConfigs) {
		fmt.Fprintf(&b, "broker-config %d %s\n", id, renderConfigs(img.BrokerConfigs[id]))
	}
	for _, top := range sortedTopics(img) {
		internal := ""
		if top.Internal {
			internal = " internal"
		}
		fmt.Fprintf(&b, "topic %s id=%s%s configs=%s\n", top.Name, top.ID, internal, renderConfigs(top.Configs))
		for _, p := range top.Partitions {
			fmt.Fprintf(&b, "  %d replicas=%v isr=%v leader=%d leader-epoch=%d partition-epoch=%d\n", p.ID, p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
		}
	}
	return b.String()
}

func renderConfigs(cfg map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		parts = append(parts, k+"="+cfg[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}
