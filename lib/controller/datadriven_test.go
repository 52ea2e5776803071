package controller

import (
	"encoding/json"
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
	if res.err != nil {
		return "error: " + res.err.Error() + "\n"
	}
	var b strings.Builder
	b.WriteString("ok")
	if res.unchanged {
		b.WriteString(" unchanged")
	}
	switch {
	case typ == cmdAllocateProducerID:
		fmt.Fprintf(&b, " first=%d", res.firstProducerID)
	case typ == cmdRegisterBroker && version >= 2:
		fmt.Fprintf(&b, " epoch=%d", res.brokerEpoch)
	case res.partition != nil:
		p := res.partition
		fmt.Fprintf(&b, " isr=%v leader=%d leader-epoch=%d partition-epoch=%d", p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
	}
	b.WriteString("\n")
	for _, e := range res.elections {
		result := "elected"
		if e.err != nil {
			result = e.err.Error()
		}
		fmt.Fprintf(&b, "  elect %s-%d: %s\n", e.Topic, e.Partition, result)
	}
	for _, u := range res.unclean {
		fmt.Fprintf(&b, "  unclean %s-%d: leader %d, former isr %v", u.Topic, u.Partition, u.Leader, u.FormerISR)
		if u.EndOffset >= 0 {
			fmt.Fprintf(&b, ", leader's log at epoch %d end offset %d", u.LastEpoch, u.EndOffset)
		}
		b.WriteString("\n")
	}
	for _, l := range res.leftISR {
		fmt.Fprintf(&b, "  lost %s-%d on broker %d: log end %d below high-water mark %d; isr %v leader %d\n", l.Topic, l.Partition, l.broker, l.EndOffset, l.HighWatermark, l.isr, l.leader)
	}
	if typ == cmdControlledShutdown {
		var id struct {
			ID int32 `json:"id"`
		}
		if err := json.Unmarshal([]byte(body), &id); err == nil {
			fmt.Fprintf(&b, "  can-shut-down=%v\n", tf.f.Image().canShutDown(id.ID))
		}
	}
	return b.String()
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
		state := ""
		if br.RaftAddr != "" {
			state += " raft=" + br.RaftAddr
		}
		if br.Fenced {
			state += " fenced"
		}
		if br.InControlledShutdown {
			state += " shutting-down"
		}
		fmt.Fprintf(&b, "broker %d %s:%d epoch=%d%s listeners=%v%s\n", br.ID, br.Host, br.Port, br.Epoch, rack, br.Listeners, state)
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
