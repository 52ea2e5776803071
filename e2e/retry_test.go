package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// TestConsumeWaitsForAPartitionWithoutALeader: a partition whose leader
// is not available (its only replica's node was killed; the same answer,
// LEADER_NOT_AVAILABLE, as a restarted mqd gives for the partitions it is
// still opening) is asked again, as any Kafka client does: mqpipe consume
// -e says on stderr what it waits for, and once the node is back it reads
// every partition to its end and exits 0.
func TestConsumeWaitsForAPartitionWithoutALeader(t *testing.T) {
	parallel(t)
	ctx := ctxFor(t, 3*time.Minute)
	l := leaderlessPartition(t, ctx)

	tool := startTool(t, "mqpipe", "consume", "-b", l.survivors, "-t", l.topic, "-o", "beginning", "-e")
	tool.waitNotice(t, "mqpipe: waiting up to ", "partition 0 had no leader")
	if s := tool.stderr.String(); !strings.Contains(s, "LEADER_NOT_AVAILABLE") || strings.Count(s, "\n") != 1 {
		t.Errorf("stderr while waiting: %q, want one line naming LEADER_NOT_AVAILABLE", s)
	}

	l.gone.start()
	if err := tool.wait(ctx); err != nil {
		t.Fatalf("mqpipe consume after the leader came back: %v\nstdout: %s\nstderr: %s", err, tool.stdout, tool.stderr)
	}
	got := strings.Fields(tool.stdout.String())
	slices.Sort(got)
	if !slices.Equal(got, l.values) {
		t.Errorf("mqpipe consume printed %q, want %q", got, l.values)
	}
}

// TestMqctlWaitsForAPartitionWithoutALeader: mqctl group reset-offsets
// needs every partition's offsets, so while one has no leader it says on
// stderr what it waits for and asks again, and once the node is back it
// commits the new offsets and exits 0. topic describe shows the state as
// it is, at once and without waiting: partition 0 has no leader.
func TestMqctlWaitsForAPartitionWithoutALeader(t *testing.T) {
	parallel(t)
	ctx := ctxFor(t, 3*time.Minute)
	l := leaderlessPartition(t, ctx)
	adm := kadm.NewClient(l.c.client(kgo.SeedBrokers(strings.Split(l.survivors, ",")...)))
	const group = "billing"
	var end kadm.Offsets
	for p := range int32(3) {
		end.Add(kadm.Offset{Topic: l.topic, Partition: p, At: 1, LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, group, end); err != nil || resp.Error() != nil {
		t.Fatalf("commit offsets of %s: %v %v", group, err, resp.Error())
	}

	r := runTool(t, time.Minute, "", "mqctl", "topic", "describe", l.topic, "-b", l.survivors, "-o", "json")
	var described []struct {
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
		} `json:"partitions"`
	}
	if r.code != 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &described) != nil || len(described) != 1 || len(described[0].Partitions) != 3 {
		t.Fatalf("topic describe while partition 0 has no leader: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if p := described[0].Partitions[0]; p.Leader != -1 || !strings.Contains(p.Error, "LEADER_NOT_AVAILABLE") {
		t.Errorf("topic describe: partition 0 %+v, want leader -1 and LEADER_NOT_AVAILABLE", p)
	}

	tool := startTool(t, "mqctl", "group", "reset-offsets", "-g", group, "-t", l.topic, "--to-earliest", "--execute", "-b", l.survivors, "-o", "json")
	tool.waitNotice(t, "mqctl: waiting up to ", "partition 0 had no leader")
	if s := tool.stderr.String(); !strings.Contains(s, "LEADER_NOT_AVAILABLE") || strings.Count(s, "\n") != 1 {
		t.Errorf("stderr while waiting: %q, want one line naming LEADER_NOT_AVAILABLE", s)
	}

	l.gone.start()
	if err := tool.wait(ctx); err != nil {
		t.Fatalf("mqctl group reset-offsets after the leader came back: %v\nstdout: %s\nstderr: %s", err, tool.stdout, tool.stderr)
	}
	t.Logf("mqctl group reset-offsets after the leader came back:\nstdout: %s\nstderr: %s", tool.stdout, tool.stderr)
	var plan struct {
		Executed bool `json:"executed"`
	}
	if err := json.Unmarshal([]byte(tool.stdout.String()), &plan); err != nil || !plan.Executed {
		t.Errorf("mqctl group reset-offsets printed %s, want an executed plan (%v)", tool.stdout, err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, ok := fetched.Lookup(l.topic, p); !ok || o.Err != nil || o.At != 0 {
			t.Errorf("committed offset of partition %d after the reset: %+v, want 0", p, o)
		}
	}
}

// leaderless is a cluster of three nodes with a topic of three
// partitions, one record in each, whose partition 0 has no leader: the
// node of its only replica was killed and every node left says
// LEADER_NOT_AVAILABLE for it (the same answer as a restarted mqd gives
// for the partitions it is still opening).
type leaderless struct {
	c         *cluster
	topic     string
	values    []string     // the records' values, sorted
	gone      *clusterNode // the killed node: start it to give partition 0 its leader back
	survivors string       // the other nodes' addresses, for -b
}

func leaderlessPartition(t *testing.T, ctx context.Context) leaderless {
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	l := leaderless{c: c, topic: "jobs"}
	if resp, err := c.admin().CreateTopic(ctx, 3, 1, nil, l.topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", l.topic, err, resp.Err)
	}
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		v := fmt.Sprintf("m%d", p)
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: l.topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
		l.values = append(l.values, v)
	}
	m, err := c.node(1).metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.gone = c.node(topicLeaders(m, l.topic)[0])
	var survivors []string
	for _, n := range c.nodes {
		if n != l.gone {
			survivors = append(survivors, n.addr)
		}
	}
	l.survivors = strings.Join(survivors, ",")
	l.gone.kill()
	clusterWait.For(t, "partition 0 without a leader on every node left", func() (bool, string) {
		for _, n := range c.serving() {
			m, err := n.metadata(ctx)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", n.id, err)
			}
			if code := partitionError(m, l.topic, 0); code != kerr.LeaderNotAvailable.Code {
				return false, fmt.Sprintf("node %d: partition 0 error %d", n.id, code)
			}
		}
		return true, ""
	})
	return l
}

// partitionError is the error code a Metadata answer gives partition p
// of topic; -1 when it does not list it.
func partitionError(m *kmsg.MetadataResponse, topic string, p int32) int16 {
	for _, tm := range m.Topics {
		if tm.Topic != nil && *tm.Topic == topic {
			for _, pm := range tm.Partitions {
				if pm.Partition == p {
					return pm.ErrorCode
				}
			}
		}
	}
	return -1
}

// backgroundTool is one of our programs running while the test changes
// the cluster under it.
type backgroundTool struct {
	name           string
	stdout, stderr *lockedBuffer
	exited         chan error // holds the exit once it happened
}

// startTool starts program name with args; it is killed when the test
// ends.
func startTool(t *testing.T, name string, args ...string) *backgroundTool {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	b := &backgroundTool{name: name, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-b.exited
		b.exited <- nil
	})
	return b
}

// waitNotice waits until the tool says on stderr that it waits
// (notice), and fails the test if it exits first, while why.
func (b *backgroundTool) waitNotice(t *testing.T, notice, why string) {
	t.Helper()
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, b.name+" to say it waits", func() (bool, string) {
		select {
		case err := <-b.exited:
			b.exited <- err
			t.Fatalf("%s exited while %s: %v\nstdout: %s\nstderr: %s", b.name, why, err, b.stdout, b.stderr)
		default:
		}
		return strings.Contains(b.stderr.String(), notice), b.stderr.String()
	})
}

// wait returns how the tool exited, or an error when ctx ends first.
func (b *backgroundTool) wait(ctx context.Context) error {
	select {
	case err := <-b.exited:
		b.exited <- err
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s did not finish: %w", b.name, ctx.Err())
	}
}
