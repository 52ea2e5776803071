package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
)

// reassign asks, through kadm, for topic's partition to move to replicas
// (nil: cancel its move) and returns the partition's error.
func reassign(t *testing.T, adm *kadm.Client, topic string, partition int32, replicas []int32) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	if replicas == nil {
		req.CancelAssign(topic, partition)
	} else {
		req.Assign(topic, partition, replicas)
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatalf("reassign %s-%d to %v: %v", topic, partition, replicas, err)
	}
	r, ok := resp[topic][partition]
	if !ok {
		t.Fatalf("reassign %s-%d: no answer for the partition in %v", topic, partition, resp)
	}
	return r.Err
}

// listReassignments returns what ListPartitionReassignments says of
// topic's partition; ok false when it is not moving.
func listReassignments(t *testing.T, adm *kadm.Client, topic string, partition int32) (kadm.ListPartitionReassignmentsResponse, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s kadm.TopicsSet
	s.Add(topic, partition)
	resp, err := adm.ListPartitionReassignments(ctx, s)
	if err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	r, ok := resp[topic][partition]
	return r, ok
}

// placed reports whether topic's partition has exactly replicas, all in
// the ISR, a leader among them, and no move in progress.
func placed(img *controller.Image, topic string, partition int32, replicas []int32) bool {
	p := img.Partition(topic, partition)
	return p != nil && !p.Reassigning() && slices.Equal(p.Replicas, replicas) && len(p.ISR) == len(replicas) && slices.Contains(replicas, p.Leader)
}

// TestClusterReassignsAPartitionUnderLoad moves a partition, its leader
// included, onto a broker that joined later while acks=all producers
// write to it: nothing acknowledged is lost or moved, the new replica
// takes over the leadership, and the broker that left deletes its copy
// once the new replica set is in force.
func TestClusterReassignsAPartitionUnderLoad(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "moving", 2)
	c.addNonVoter()
	c.waitImage("4 brokers", func(img *controller.Image) bool { return len(img.Brokers) == 4 })
	adm := kadm.NewClient(c.client())
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := produceAll(t, cl, "moving", 0, 2000)

	before := c.image().Partition("moving", 0)
	leaving := before.Leader
	target := []int32{4}
	for _, r := range before.Replicas {
		if r != leaving {
			target = append(target, r)
		}
	}

	// A group reads the topic through the move: its members must not be
	// disturbed (no revocation, no second assignment).
	var groupMu sync.Mutex
	var assigned, revoked int
	var consumed int64
	gcl := c.client(kgo.ConsumerGroup("movers"), kgo.ConsumeTopics("moving"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			groupMu.Lock()
			assigned++
			groupMu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {
			groupMu.Lock()
			revoked++
			groupMu.Unlock()
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {
			groupMu.Lock()
			revoked++
			groupMu.Unlock()
		}))
	gctx, gcancel := context.WithCancel(context.Background())
	gdone := make(chan struct{})
	go func() {
		defer close(gdone)
		for gctx.Err() == nil {
			fs := gcl.PollFetches(gctx)
			groupMu.Lock()
			consumed += int64(fs.NumRecords())
			groupMu.Unlock()
		}
	}()
	clusterWait.For(t, "the group reading", func() (bool, string) {
		groupMu.Lock()
		defer groupMu.Unlock()
		return assigned == 1 && consumed > 0, fmt.Sprintf("%d assignments, %d records", assigned, consumed)
	})

	// Producers keep writing through the move.
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 2000; ; i += 200 {
			select {
			case <-stop:
				return
			default:
			}
			more := produceAll(t, cl, "moving", i, 200)
			mu.Lock()
			for k, v := range more {
				acked[k] = v
			}
			mu.Unlock()
		}
	}()
	if err := reassign(t, adm, "moving", 0, target); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	c.waitImage("moving-0 on "+describeReplicas(target), func(img *controller.Image) bool {
		return placed(img, "moving", 0, target)
	})
	close(stop)
	wg.Wait()
	// The group reads what is produced after the move, then must not have
	// been disturbed.
	for k, v := range produceAll(t, cl, "moving", 1_000_000, 100) {
		acked[k] = v
	}
	clusterWait.For(t, "the group reading every record", func() (bool, string) {
		groupMu.Lock()
		defer groupMu.Unlock()
		return consumed >= int64(len(acked)), fmt.Sprintf("%d of %d records", consumed, len(acked))
	})
	gcancel()
	<-gdone
	groupMu.Lock()
	if assigned != 1 || revoked != 0 {
		t.Errorf("the group was disturbed by the move: %d assignments, %d revocations or losses", assigned, revoked)
	}
	groupMu.Unlock()

	img := c.image()
	if p := img.Partition("moving", 0); p.Leader == leaving || p.LeaderEpoch <= before.LeaderEpoch {
		t.Errorf("moving-0 led by %d at epoch %d after broker %d left (epoch %d before)", p.Leader, p.LeaderEpoch, leaving, before.LeaderEpoch)
	}
	if _, moving := listReassignments(t, adm, "moving", 0); moving {
		t.Error("ListPartitionReassignments still lists moving-0 after the move completed")
	}
	clusterWait.For(t, "broker "+describeReplicas([]int32{leaving})+" deleted its copy of moving-0", func() (bool, string) {
		d := c.Get(leaving)
		_, err := os.Stat(filepath.Join(d.settings.DataDir, "moving-0"))
		return d.parts.Lookup("moving", 0) == nil && errors.Is(err, os.ErrNotExist), "stat: " + errString(err)
	})
	if h := c.Get(4).parts.Lookup("moving", 0); h == nil || h.Log().EndOffset() == 0 {
		t.Fatalf("broker 4 holds no data of moving-0: %v", h)
	}
	readBack(t, c, "moving", acked)
}

// TestClusterCancelsAReassignment starts a move onto a broker that is
// down, so it cannot complete; ListPartitionReassignments shows it, and
// cancelling restores the original replicas with nothing lost. Cancelling
// again answers NO_REASSIGNMENT_IN_PROGRESS, and a bad target
// INVALID_REPLICA_ASSIGNMENT.
func TestClusterCancelsAReassignment(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "stuck", 1)
	c.addNonVoter()
	c.waitImage("4 brokers", func(img *controller.Image) bool { return len(img.Brokers) == 4 })
	c.Stop(4)
	adm := kadm.NewClient(c.client())
	acked := produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "stuck", 0, 500)
	orig := slices.Clone(c.image().Partition("stuck", 0).Replicas)
	target := []int32{orig[0], orig[1], 4}

	if err := reassign(t, adm, "stuck", 0, target); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	r, ok := listReassignments(t, adm, "stuck", 0)
	if !ok || !slices.Equal(r.AddingReplicas, []int32{4}) || !slices.Equal(r.RemovingReplicas, []int32{orig[2]}) {
		t.Fatalf("ListPartitionReassignments: %+v (listed %v), want adding [4] removing [%d]", r, ok, orig[2])
	}
	// The move waits for broker 4; the partition is not under-replicated
	// for it (KIP-352), and the leader counts it as moving, once its
	// image has the move (a node applies the controller's log on its own).
	leader := c.waitImage("stuck-0 moving on every node", func(img *controller.Image) bool {
		p := img.Partition("stuck", 0)
		return p != nil && p.Reassigning()
	}).Partition("stuck", 0).Leader
	if snap := c.Get(leader).MetricsSnapshot(false); snap.Reassigning != 1 || snap.UnderReplicated != 0 {
		t.Errorf("the leader's metrics show %d partitions reassigning and %d under-replicated, want 1 and 0", snap.Reassigning, snap.UnderReplicated)
	}
	// Produce goes on while the move waits for broker 4.
	for k, v := range produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "stuck", 500, 500) {
		acked[k] = v
	}
	if err := reassign(t, adm, "stuck", 0, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	c.waitImage("stuck-0 back on "+describeReplicas(orig), func(img *controller.Image) bool {
		return placed(img, "stuck", 0, orig)
	})
	if err := reassign(t, adm, "stuck", 0, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Errorf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	if err := reassign(t, adm, "stuck", 0, []int32{1, 1, 2}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("duplicate replica: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
	if err := reassign(t, adm, "stuck", 0, []int32{1, 2, 99}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("unknown broker: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
	readBack(t, c, "stuck", acked)

	// Without a quorum the move cannot be committed: the request's error
	// is said on the partition too, for clients that read only those.
	c.Stop(2)
	c.Stop(3)
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 500
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "stuck"
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// To node 1 itself: kgo would send an admin request to the controller
	// the last metadata named, which may be one of those stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := c.client().Broker(1).Request(ctx, req)
	resp, _ := raw.(*kmsg.AlterPartitionAssignmentsResponse)
	if err != nil {
		t.Fatalf("AlterPartitionReassignments without a quorum: %v", err)
	}
	if resp.ErrorCode == 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != resp.ErrorCode {
		t.Errorf("AlterPartitionReassignments without a quorum answered %+v, want its error on the partition too", resp)
	}
}

func describeReplicas(rs []int32) string { return fmt.Sprintf("brokers %v", rs) }

func errString(err error) string {
	if err == nil {
		return "exists"
	}
	return err.Error()
}

// TestClusterDeletesAReplicaMovedAwayWhileDown moves a partition off a
// broker that is down: when it starts again its copy, owned by the same
// topic, is deleted rather than left behind as a stray directory, while
// the copies of partitions it still hosts stay.
func TestClusterDeletesAReplicaMovedAwayWhileDown(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "away", 2)
	c.addNonVoter()
	c.waitImage("4 brokers", func(img *controller.Image) bool { return len(img.Brokers) == 4 })
	acked := produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "away", 0, 500)
	p := c.image().Partition("away", 0)
	var gone int32 = -1
	for _, r := range p.Replicas {
		if r != p.Leader {
			gone = r
			break
		}
	}
	target := []int32{p.Leader, 4}
	for _, r := range p.Replicas {
		if r != p.Leader && r != gone {
			target = append(target, r)
		}
	}
	dir := filepath.Join(c.Get(gone).settings.DataDir, "away-0")
	kept := filepath.Join(c.Get(gone).settings.DataDir, "away-1")
	c.Stop(gone)
	if err := reassign(t, kadm.NewClient(c.client()), "away", 0, target); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	c.waitImage("away-0 on "+describeReplicas(target), func(img *controller.Image) bool {
		return placed(img, "away", 0, target)
	})
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("broker %d's copy of away-0 is gone while the broker is down: %v", gone, err)
	}
	c.Start(gone)
	clusterWait.For(t, fmt.Sprintf("broker %d deleted its copy of away-0 at start", gone), func() (bool, string) {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist), "stat: " + errString(err)
	})
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("broker %d's copy of away-1, which it still hosts: %v", gone, err)
	}
	readBack(t, c, "away", acked)
}
