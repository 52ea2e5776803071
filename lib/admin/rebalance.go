package admin

import (
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProposeRebalance plans cluster rebalance: every partition of the
// cluster (internal topics too) spread over the live brokers (neither
// fenced nor shutting down, and answering), evening out replicas and preferred leaders
// with the fewest moves (Place, with balance). On a balanced cluster the
// plan is empty. It refuses while partitions move.
func (a *Admin) ProposeRebalance(ctx context.Context) (Proposal, error) {
	const what = "cluster rebalance"
	if err := a.require(ctx, what, kmsg.AlterPartitionAssignments); err != nil {
		return Proposal{}, err
	}
	c, err := a.state(ctx, what, nil)
	if err != nil {
		return Proposal{}, err
	}
	if err := c.settled(what); err != nil {
		return Proposal{}, err
	}
	before, down := a.placements(ctx, c)
	return propose(what, c, before, c.targets(down, -1), true)
}

// Move is how RunProposal carries a proposal out.
type Move struct {
	// Throttle, above 0, limits the copies to this many bytes per second
	// (see Execute).
	Throttle int64
	// NoWait returns once the moves are submitted; otherwise RunProposal
	// shows their progress on Notices (see Watch) until they end.
	NoWait   bool
	Notices  io.Writer
	Terminal bool
}

// RunProposal executes a proposal's plan and, unless m.NoWait, waits for
// its moves to end, showing their progress, and then elects the plan's
// preferred leaders (electPreferred). An empty plan does nothing.
func (a *Admin) RunProposal(ctx context.Context, p Proposal, m Move) error {
	if len(p.Plan.Partitions) == 0 {
		return nil
	}
	if _, err := a.ExecuteReassignment(ctx, Execute{Plan: p.Plan, Throttle: m.Throttle, Notices: m.Notices}); err != nil {
		return err
	}
	if m.NoWait {
		return nil
	}
	if err := a.WatchReassignment(ctx, Watch{Partitions: p.Plan.Partitions, Out: m.Notices, Terminal: m.Terminal}); err != nil {
		return err
	}
	a.electPreferred(ctx, p.Plan, m.Notices)
	return nil
}

// electPreferred moves the leadership of plan's partitions to their
// preferred leaders: a completed move changes the leader only where the
// old one left, so the spread of preferred leaders the plan made is not
// the spread of leaders until this election. Its outcome is said on
// notices; a partition it could not elect does not fail the command
// (partition elect-leaders can try again).
func (a *Admin) electPreferred(ctx context.Context, plan Plan, notices io.Writer) {
	req := ElectLeaders{}
	for _, pp := range plan.Partitions {
		req.Partitions = append(req.Partitions, PartitionSpec{Topic: pp.Topic, Partition: pp.Partition})
	}
	rs, err := a.ElectLeaders(ctx, req)
	elected := 0
	for _, r := range rs {
		if r.Result == ResultElected {
			elected++
		}
	}
	if notices == nil {
		return
	}
	if elected > 0 {
		fmt.Fprintf(notices, "mqctl: leadership moved to the preferred leader of %d partitions\n", elected)
	}
	if err != nil {
		fmt.Fprintf(notices, "mqctl: %s (mqctl partition elect-leaders tries again)\n", oneLine(err.Error()))
	}
}

// targets are the brokers replicas may move to: live, not shutting down,
// answering (not in down), and not except.
func (c clusterState) targets(down map[int32]string, except int32) []int32 {
	var out []int32
	for _, id := range c.liveBrokers() {
		if _, gone := down[id]; !gone && id != except && c.roster.states[id] != BrokerShuttingDown {
			out = append(out, id)
		}
	}
	return out
}
