package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	ctx := ctxFor(t, 3*time.Minute)
	const topic = "jobs"
	if resp, err := c.admin().CreateTopic(ctx, 3, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []string
	for p := range int32(3) {
		v := fmt.Sprintf("m%d", p)
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
		want = append(want, v)
	}
	m, err := c.node(1).metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := c.node(topicLeaders(m, topic)[0])
	var survivors []string
	for _, n := range c.nodes {
		if n != gone {
			survivors = append(survivors, n.addr)
		}
	}
	gone.kill()
	clusterWait.For(t, "partition 0 without a leader on every node left", func() (bool, string) {
		for _, n := range c.serving() {
			m, err := n.metadata(ctx)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", n.id, err)
			}
			if code := partitionError(m, topic, 0); code != kerr.LeaderNotAvailable.Code {
				return false, fmt.Sprintf("node %d: partition 0 error %d", n.id, code)
			}
		}
		return true, ""
	})

	cmd := exec.Command(filepath.Join(binDir, "mqpipe"), "consume", "-b", strings.Join(survivors, ","), "-t", topic, "-o", "beginning", "-e")
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		exited <- nil
	})
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "mqpipe consume to say it waits", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("mqpipe consume exited while partition 0 had no leader: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		default:
		}
		return strings.Contains(stderr.String(), "mqpipe: waiting up to "), stderr.String()
	})
	if s := stderr.String(); !strings.Contains(s, "LEADER_NOT_AVAILABLE") || strings.Count(s, "\n") != 1 {
		t.Errorf("stderr while waiting: %q, want one line naming LEADER_NOT_AVAILABLE", s)
	}

	gone.start()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("mqpipe consume after the leader came back: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
	case <-ctx.Done():
		t.Fatalf("mqpipe consume did not finish after the leader came back\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	got := strings.Fields(stdout.String())
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("mqpipe consume printed %q, want %q", got, want)
	}
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
