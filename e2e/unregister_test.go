package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// quorumMembers lists the controller quorum's voters and observers (the
// non-voters) as DescribeQuorum reports them.
func quorumMembers(ctx context.Context, c *cluster) (voters, observers []int32, err error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, nil, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	part := resp.Topics[0].Partitions[0]
	for _, v := range part.CurrentVoters {
		voters = append(voters, v.ReplicaID)
	}
	for _, o := range part.Observers {
		observers = append(observers, o.ReplicaID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers, nil
}

// TestUnregisterBrokerRemovesANonVoter: mqctl broker unregister removes
// a node that joined as a non-voter, once it is stopped and holds no
// replica: its broker leaves Metadata and the node the quorum. A voter,
// a running broker, a broker holding a replica and an unknown ID are
// refused, each saying why.
func TestUnregisterBrokerRemovesANonVoter(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{voters: 2})
	ctx := ctxFor(t, time.Minute)
	mqtest.WaitFor(t, "node 3 among the quorum's observers", func() (bool, string) {
		v, o, err := quorumMembers(ctx, c)
		return err == nil && slices.Equal(v, []int32{1, 2}) && slices.Equal(o, []int32{3}), fmt.Sprintf("voters %v observers %v err %v", v, o, err)
	})
	adm := c.admin()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "on-three"); err != nil {
		t.Fatal(err)
	}

	refused := func(id, why string) {
		t.Helper()
		r := c.mqctl(t, time.Minute, "broker", "unregister", id)
		if r.code != 1 || !strings.Contains(r.stderr, why) {
			t.Fatalf("broker unregister %s: exit %d, stderr %q; want exit 1 saying %q", id, r.code, r.stderr, why)
		}
	}
	refused("1", "is a voter")
	refused("3", "is running")
	c.node(3).stop()
	refused("3", "still hosts replicas of 1 partitions (on-three:0")
	if _, err := adm.DeleteTopic(ctx, "on-three"); err != nil {
		t.Fatal(err)
	}

	r := c.mqctl(t, time.Minute, "broker", "unregister", "3", "-o", "json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"broker":3,"result":"unregistered"}` {
		t.Fatalf("broker unregister 3: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	v, o, err := quorumMembers(ctx, c)
	if err != nil || !slices.Equal(v, []int32{1, 2}) || len(o) != 0 {
		t.Fatalf("quorum after unregistering 3: voters %v observers %v err %v", v, o, err)
	}
	mqtest.WaitFor(t, "broker 3 gone from every node's Metadata", func() (bool, string) {
		for _, n := range c.nodes[:2] {
			md, err := n.metadata(ctx)
			if err != nil {
				return false, err.Error()
			}
			var ids []int32
			for _, b := range md.Brokers {
				ids = append(ids, b.NodeID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int32{1, 2}) {
				return false, fmt.Sprintf("node %d lists brokers %v", n.id, ids)
			}
		}
		return true, ""
	})
	refused("3", "BROKER_ID_NOT_REGISTERED")

	// The cluster goes on without it.
	if _, err := adm.CreateTopic(ctx, 2, 2, nil, "after"); err != nil {
		t.Fatal(err)
	}
}
