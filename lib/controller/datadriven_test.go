package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/mqproject/mq/lib/mqtest/dd"
)

// TestDataDriven runs the scripts testdata/*.txt against a bare FSM, one
// per script (lib/mqtest/dd: the format, go test -rewrite). A case is
//
//	<command> [version=<n>]
//	<record body>
//	----
//	<expected output>
//
// where <command> names a command type (commandType.String, or its
// number) and the body is the record's JSON: the record, at version n (1
// when not given), is applied at the next log index, printing "ok" or the
// error. The command "image" prints the current image.
func TestDataDriven(t *testing.T) {
	dd.Run(t, "testdata", func(t *testing.T) dd.Runner {
		tf := newTestFSM(t)
		return func(t *testing.T, td *datadriven.TestData) string {
			return runCase(t, tf, td)
		}
	})
}

// runCase runs one case against tf and returns what it prints.
func runCase(t *testing.T, tf *testFSM, td *datadriven.TestData) string {
	if td.Cmd == "image" {
		if len(td.CmdArgs) > 0 || td.Input != "" {
			td.Fatalf(t, "image takes no arguments and no input")
		}
		return renderImage(tf.f.Image())
	}
	typ, ok := commandNamed(td.Cmd)
	if !ok {
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	for _, arg := range td.CmdArgs {
		if arg.Key != "version" {
			td.Fatalf(t, "unknown argument %q", arg.Key)
		}
	}
	version := uint8(1)
	if td.HasArg("version") {
		td.ScanArgs(t, "version", &version)
	}
	body := td.Input
	res := tf.apply(append([]byte{byte(typ), version}, body...))
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
	for _, r := range res.reassignments {
		result := "ok"
		if r.err != nil {
			result = r.err.Error()
		}
		fmt.Fprintf(&b, "  reassign %s-%d: %s\n", r.Topic, r.Partition, result)
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
			fmt.Fprintf(&b, "  %d replicas=%v isr=%v leader=%d leader-epoch=%d partition-epoch=%d", p.ID, p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
			if p.Reassigning() {
				fmt.Fprintf(&b, " adding=%v removing=%v original=%v", p.AddingReplicas, p.RemovingReplicas, p.OriginalReplicas)
			}
			b.WriteString("\n")
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
