package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// TestRestartedNodeLeadsNothingBeforeItRegisters: a node that crashed and
// comes back within the broker session timeout opens its logs while its
// image still names it leader in its previous incarnation's epochs, and
// that log may have lost its unflushed tail. Until its registration is in
// the image it must lead nothing (a produce gets NOT_LEADER_OR_FOLLOWER,
// Metadata LEADER_NOT_AVAILABLE) and coordinate no group; once Start has
// returned, it leads only in an epoch the registration gave it, or the
// leadership has moved.
func TestRestartedNodeLeadsNothingBeforeItRegisters(t *testing.T) {
	c := startCluster(t, 3, func(s *config.Broker) {
		s.BrokerSessionTimeout = 20 * time.Second // not fenced while down
		// The crash closes the node's ports, which the controller would
		// take for a dead process and fence it at once: this test needs
		// it unfenced while down, as a machine that vanished would be.
		s.ProcessProbe = false
		s.OffsetsTopicNumPartitions = 6
	})
	createReplicated(t, c, "r", 1)
	produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "r", 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Created through a node that may see it in its image a moment later.
	adm := kadm.NewClient(c.client())
	clusterWait.For(t, "__consumer_offsets created", func() (bool, string) {
		err := adm.FindGroupCoordinators(ctx, "g").Error()
		return err == nil, fmt.Sprintf("FindCoordinator: %v", err)
	})
	before := c.waitImage("__consumer_offsets led", func(img *controller.Image) bool {
		return fullyInSync(img, "__consumer_offsets") && fullyInSync(img, "r")
	})
	p := *before.Partition("r", 0)
	self := p.Leader
	var offsetsLed []int32 // the __consumer_offsets partitions self leads
	for _, op := range before.Topics["__consumer_offsets"].Partitions {
		if op.Leader == self {
			offsetsLed = append(offsetsLed, op.ID)
		}
	}
	if len(offsetsLed) == 0 {
		t.Fatalf("setup: node %d leads no partition of __consumer_offsets", self)
	}
	c.Crash(self)

	checked := false
	testHookBeforeRegister = func(d *Daemon) {
		if d.settings.NodeID != self {
			return
		}
		checked = true
		img := d.ctrl.Image()
		// Errors, not Fatal: Start must go on to return the Daemon, which
		// the cluster's cleanup stops.
		if q := img.Partition("r", 0); q.Leader != self || q.LeaderEpoch != p.LeaderEpoch {
			t.Errorf("setup: the image before registering says r-0 is led by %d in epoch %d, want %d in %d (the old incarnation's)",
				q.Leader, q.LeaderEpoch, self, p.LeaderEpoch)
			return
		}
		h := d.parts.Lookup("r", 0)
		if h == nil {
			t.Error("r-0 is not open before the registration")
			return
		}
		if h.IsLeader() {
			t.Errorf("before registering, the restarted node leads r-0 in epoch %d, its previous incarnation's", h.LeaderEpoch())
		}
		batch, err := record.Build(record.BuildOptions{BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := h.Append(batch, -1); !errors.Is(err, replica.ErrNotLeader) {
			t.Errorf("append to r-0 before registering: %+v, %v; want replica.ErrNotLeader", res, err)
		}
		if code := metadataOf(t, d, "r"); code == 0 {
			t.Errorf("Metadata before registering: r-0 has no error, want LEADER_NOT_AVAILABLE")
		}
		if owned := d.coords.Groups.Owned(); len(owned) > 0 {
			t.Errorf("before registering, the group coordinator owns __consumer_offsets partitions %v (led before: %v)", owned, offsetsLed)
		}
	}
	t.Cleanup(func() { testHookBeforeRegister = nil })
	c.Start(self)
	testHookBeforeRegister = nil
	if !checked {
		t.Fatal("Start did not call the hook before its registration")
	}
	if t.Failed() {
		t.FailNow()
	}

	// Start returned: the registration is applied.
	d := c.Get(self)
	img := d.ctrl.Image()
	after := img.Partition("r", 0)
	h := d.parts.Lookup("r", 0)
	if h.IsLeader() && h.LeaderEpoch() <= p.LeaderEpoch {
		t.Errorf("after registering, the node leads r-0 in epoch %d, not past its previous incarnation's %d", h.LeaderEpoch(), p.LeaderEpoch)
	}
	if after.Leader == self && !h.IsLeader() {
		t.Errorf("Start returned before the node leads r-0 as its image says (leader %d, epoch %d)", after.Leader, after.LeaderEpoch)
	}
	if after.LeaderEpoch <= p.LeaderEpoch {
		t.Errorf("the registration left r-0 in leader epoch %d (leader %d): want a new epoch", after.LeaderEpoch, after.Leader)
	}
	// The node coordinates the groups of what it leads once more.
	mqtest.WaitFor(t, "the group coordinator to own what the node leads", func() (bool, string) {
		owned := d.coords.Groups.Owned()
		for _, op := range d.ctrl.Image().Topics["__consumer_offsets"].Partitions {
			if op.Leader == self && !slices.Contains(owned, op.ID) {
				return false, fmt.Sprintf("node %d leads __consumer_offsets-%d, coordinates %v", self, op.ID, owned)
			}
		}
		return true, ""
	})
	produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "r", 20, 20)
}

// metadataOf asks node d itself, over its TCP listener, for the Metadata
// of topic's partition 0 and returns its error code.
func metadataOf(t *testing.T, d *Daemon, topic string) int16 {
	t.Helper()
	var addr string
	for _, a := range d.Addrs() {
		if strings.HasPrefix(a, "tcp://") {
			addr = strings.TrimPrefix(a, "tcp://")
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata from node %d: %v", d.settings.NodeID, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		t.Fatalf("metadata from node %d: no partitions of %s: %+v", d.settings.NodeID, topic, resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestRestartedNodeRegistersAgainWhenTheOutcomeIsUnknown: a registration
// whose outcome the controller could not tell (its leadership lost while
// committing) is sent again, and the node starts; before, it exited.
func TestRestartedNodeRegistersAgainWhenTheOutcomeIsUnknown(t *testing.T) {
	c := startCluster(t, 3, nil)
	const self = 3
	c.Crash(self)
	attempts := 0
	testHookRegister = func(d *Daemon) error {
		if d.settings.NodeID != self {
			return nil
		}
		attempts++
		if attempts == 1 {
			return fmt.Errorf("%w: leadership lost while committing log", controller.ErrNotController)
		}
		return nil
	}
	t.Cleanup(func() { testHookRegister = nil })
	c.Start(self)
	testHookRegister = nil
	if attempts != 2 {
		t.Fatalf("%d registration attempts, want 2 (one refused, one accepted)", attempts)
	}
	c.waitImage("node 3 registered and unfenced", func(img *controller.Image) bool {
		b, ok := img.Brokers[self]
		return ok && !b.Fenced
	})
}
