package partition

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
)

// startControllers opens n controllers in-process, the voters of one
// quorum on loopback ports (an mqtest.Cluster), with brokers 1..n
// registered, and returns them in node ID order.
func startControllers(t *testing.T, n int) []*controller.Controller {
	t.Helper()
	var voters []controller.Voter
	c := mqtest.NewCluster(t, n, mqtest.Lifecycle[*controller.Controller]{
		Start: func(m mqtest.Member) (*controller.Controller, error) {
			return controller.Open(controller.Config{NodeID: m.ID, Dir: m.Dir, Voters: voters, RaftAddr: m.RaftAddr})
		},
		Stop: (*controller.Controller).Close,
	})
	voters, err := controller.ParseVoters(c.Voters())
	if err != nil {
		t.Fatal(err)
	}
	c.StartAll()
	var ctrls []*controller.Controller
	for _, ctrl := range c.Running() {
		ctrls = append(ctrls, ctrl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range voters {
		if _, err := ctrls[0].RegisterBroker(ctx, controller.Broker{ID: v.ID, Host: "127.0.0.1", Port: 9092 + v.ID}); err != nil {
			t.Fatalf("register broker %d: %v", v.ID, err)
		}
	}
	return ctrls
}

// createReplicated creates a topic of one partition on every broker of
// ctrls and returns it once every controller's image holds it.
func createReplicated(t *testing.T, ctrls []*controller.Controller, name string) *controller.Topic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ctrls[0].CreateTopic(ctx, controller.CreateTopic{Name: name, Partitions: 1, ReplicationFactor: int16(len(ctrls))}); err != nil {
		t.Fatal(err)
	}
	for _, c := range ctrls {
		for c.Image().Topics[name] == nil {
			changed := c.Changes()
			if c.Image().Topics[name] != nil {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("topic %s not in every image: %v", name, ctx.Err())
			}
		}
	}
	return ctrls[0].Image().Topics[name]
}

// TestISROutcome checks how the ISR loop reads an AlterPartition error:
// only a refusal that proves nothing was applied may drop the followers
// a proposal was adding from the high-water mark's set.
func TestISROutcome(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"deadline", context.DeadlineExceeded, isrUnknown},
		{"canceled at stop", context.Canceled, isrUnknown},
		{"raft leadership lost", fmt.Errorf("%w: leadership lost while committing command", controller.ErrNotController), isrUnknown},
		{"connection broke", fmt.Errorf("%w: propose to 127.0.0.1:1: outcome unknown: EOF", controller.ErrNotController), isrUnknown},
		// The text of a refusal inside an unknown outcome is not a refusal.
		{"unknown wins", fmt.Errorf("%w: %w", controller.ErrNotController, controller.ErrInvalidPartitionState), isrUnknown},
		{"closed", controller.ErrClosed, isrUnknown},
		{"other", errors.New("controller: apply: something"), isrUnknown},
		{"topic deleted", fmt.Errorf("%w: %q", controller.ErrUnknownTopic, "t"), isrUnknown},
		{"stale partition epoch", fmt.Errorf("%w: partition epoch 3, current 4", controller.ErrInvalidUpdateVersion), isrSuperseded},
		{"stale leader epoch", fmt.Errorf("%w: leader epoch 3, current 4", controller.ErrFencedLeaderEpoch), isrSuperseded},
		{"invalid ISR", fmt.Errorf("%w: leader 1 is not in the isr", controller.ErrInvalidPartitionState), isrRefused},
		{"ineligible replica", fmt.Errorf("%w: broker 3 is fenced", controller.ErrIneligibleReplica), isrRefused},
		{"not the leader", fmt.Errorf("%w: broker 2, leader is 1", controller.ErrNotLeader), isrRefused},
	}
	for _, tt := range tests {
		if got := isrOutcome(tt.err); got != tt.want {
			t.Errorf("%s (%v): outcome %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestISROutcomeFromController checks the classification against a real
// controller's refusals, from the Raft leader and through a forward from
// the other nodes, where the errors cross the wire.
func TestISROutcomeFromController(t *testing.T) {
	ctrls := startControllers(t, 3)
	p := createReplicated(t, ctrls, "isr-outcome").Partitions[0]
	valid := controller.AlterPartition{
		Topic: "isr-outcome", Partition: 0, Leader: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR,
	}
	var other int32 = 1
	if p.Leader == 1 {
		other = 2
	}
	tests := []struct {
		name   string
		change func(*controller.AlterPartition)
		want   int
	}{
		{"stale partition epoch", func(a *controller.AlterPartition) { a.PartitionEpoch-- }, isrSuperseded},
		{"stale leader epoch", func(a *controller.AlterPartition) { a.LeaderEpoch-- }, isrSuperseded},
		{"without the leader", func(a *controller.AlterPartition) { a.ISR = []int32{other} }, isrRefused},
		{"not a replica", func(a *controller.AlterPartition) { a.ISR = append([]int32{p.Leader}, 99) }, isrRefused},
		{"not the leader", func(a *controller.AlterPartition) { a.Leader = other }, isrRefused},
	}
	for i, ctrl := range ctrls {
		for _, tt := range tests {
			a := valid
			tt.change(&a)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := ctrl.AlterPartition(ctx, a)
			cancel()
			if err == nil || isrOutcome(err) != tt.want {
				t.Errorf("node %d, %s: %v: outcome %d, want %d", i+1, tt.name, err, isrOutcome(err), tt.want)
			}
		}
		// The same refusals as changes of one command of many.
		batch := make([]controller.AlterPartition, len(tests))
		for j, tt := range tests {
			batch[j] = valid
			tt.change(&batch[j])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		results, err := ctrl.AlterPartitions(ctx, batch)
		cancel()
		if err != nil || len(results) != len(tests) {
			t.Fatalf("node %d: AlterPartitions: %v (%d outcomes)", i+1, err, len(results))
		}
		for j, tt := range tests {
			if err := results[j].Err; err == nil || isrOutcome(err) != tt.want {
				t.Errorf("node %d, %s in a batch: %v: outcome %d, want %d", i+1, tt.name, err, isrOutcome(err), tt.want)
			}
		}
	}
	if got := ctrls[0].Image().Topics["isr-outcome"].Partitions[0]; got.PartitionEpoch != p.PartitionEpoch {
		t.Errorf("partition epoch %d after refusals, want %d", got.PartitionEpoch, p.PartitionEpoch)
	}
}
