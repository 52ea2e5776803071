package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Reassignment asks for one partition to move to a new replica set
// (KIP-455), or for its move to be cancelled.
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas is the target replica set, the preferred leader first;
	// nil cancels the reassignment in progress.
	Replicas []int32
}

// AlterReassignments starts, changes or cancels the reassignment of each
// partition, each on its own, and returns each one's outcome: nil, or
// ErrUnknownTopic, ErrUnknownPartition, ErrInvalidReplicaAssignment (a
// bad target, or a cancel that would leave no in-sync replica to lead),
// ErrNoReassignmentInProgress (a cancel of a partition not moving). The
// error is the command's, as AlterPartitions'.
//
// A target equal to the replica set changes nothing. Otherwise the
// partition's Replicas becomes the target followed by the replicas that
// leave; the new ones replicate in the background, and once every one
// of them is in the ISR the controller drops the leaving ones (moving the
// leadership when the leader leaves) in the same command that grows the
// ISR. A move that needs no new replica (fewer replicas, another order)
// completes at once. A new target for a partition already moving
// replaces the old one; cancelling restores the set the partition had
// before its first move.
func (c *Controller) AlterReassignments(ctx context.Context, rs []Reassignment) ([]error, error) {
	out := make([]error, 0, len(rs))
	for chunk := range slices.Chunk(rs, maxAlterations) {
		body := &alterReassignmentsV1{Partitions: make([]reassignmentV1, len(chunk))}
		for i, r := range chunk {
			body.Partitions[i] = reassignmentV1{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas}
		}
		res, err := c.propose(ctx, cmdAlterReassignments, body)
		if err != nil {
			return nil, err
		}
		if len(res.reassignments) != len(chunk) {
			return nil, fmt.Errorf("controller: AlterReassignments answered %d outcomes for %d partitions", len(res.reassignments), len(chunk))
		}
		for _, e := range res.reassignments {
			out = append(out, e.err)
		}
	}
	return out, nil
}

// applyAlterReassignments applies each reassignment of c to img, in order
// and on its own, copying a topic's partitions once however many of them
// change. The command is refused only when malformed.
func applyAlterReassignments(img *Image, c *alterReassignmentsV1, res *applyResult) error {
	if len(c.Partitions) == 0 || len(c.Partitions) > maxAlterations {
		return fmt.Errorf("%w: AlterReassignments of %d partitions, want 1..%d", ErrInvalidCommand, len(c.Partitions), maxAlterations)
	}
	copied := topicCopies{}
	for _, r := range c.Partitions {
		q, changed, err := reassignPartition(img, copied.topic(img, r.Topic), r)
		res.reassignments = append(res.reassignments, electionResult{TopicPartition{r.Topic, r.Partition}, err})
		if err == nil && changed {
			copied.set(img, r.Topic, q)
		}
	}
	res.unchanged = !copied.publish(img)
	return nil
}

// reassignPartition returns the partition of t that r names after r, and
// whether it changed.
func reassignPartition(img *Image, t *Topic, r reassignmentV1) (Partition, bool, error) {
	if t == nil {
		return Partition{}, false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Topic)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return Partition{}, false, fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, r.Topic, r.Partition)
	}
	p := t.Partitions[r.Partition]
	where := fmt.Sprintf("%q partition %d", r.Topic, r.Partition)
	var q Partition
	if r.Replicas == nil {
		var err error
		if q, err = cancelReassignment(img, p); err != nil {
			return Partition{}, false, fmt.Errorf("%s: %w", where, err)
		}
	} else {
		if err := checkReplicas(r.Replicas); err != nil {
			return Partition{}, false, fmt.Errorf("%s: %w", where, err)
		}
		for _, b := range r.Replicas {
			if _, ok := img.Brokers[b]; !ok {
				return Partition{}, false, fmt.Errorf("%w: %s: broker %d is not registered", ErrInvalidReplicaAssignment, where, b)
			}
		}
		q = startReassignment(img, p, r.Replicas)
	}
	if samePlacement(p, q) {
		return p, false, nil
	}
	q.PartitionEpoch = bumped(p.PartitionEpoch)
	return q, true, nil
}

// startReassignment returns p moving to target: the replicas already
// there stay until the move completes, and the original set is kept for
// a cancel. It completes at once when no new replica must catch up.
func startReassignment(img *Image, p Partition, target []int32) Partition {
	orig := p.Original()
	q := p
	q.Replicas = append(slices.Clone(target), minus(p.Replicas, target)...)
	q.AddingReplicas = minus(q.Replicas, orig)
	q.RemovingReplicas = minus(q.Replicas, target)
	q.OriginalReplicas = slices.Clone(orig)
	if !q.Reassigning() {
		q.OriginalReplicas = nil // another order of the same replicas
	}
	return completeReassignment(img, q)
}

// completeReassignment ends p's reassignment when every replica it adds to
// the target is in the ISR, some ISR member stays and, where the leader
// leaves, a live ISR member of the target can take over: Replicas becomes
// the target and the leaving replicas leave the ISR. Otherwise, or with no
// reassignment in progress, it returns p as it is. It does not move the
// partition epoch; its caller does.
func completeReassignment(img *Image, p Partition) Partition {
	if !p.Reassigning() {
		return p
	}
	for _, r := range minus(p.AddingReplicas, p.RemovingReplicas) {
		if !slices.Contains(p.ISR, r) {
			return p
		}
	}
	isr := minus(p.ISR, p.RemovingReplicas)
	if len(isr) == 0 {
		return p
	}
	target := p.Target()
	leader := p.Leader
	if !slices.Contains(target, leader) {
		leader = firstAlive(img, target, -1, func(r int32) bool { return slices.Contains(isr, r) })
		if leader < 0 {
			return p
		}
		p.LeaderEpoch = bumped(p.LeaderEpoch)
	}
	p.Replicas, p.ISR, p.Leader = slices.Clone(target), slices.Clone(isr), leader
	p.AddingReplicas, p.RemovingReplicas, p.OriginalReplicas = nil, nil, nil
	return p
}

// cancelReassignment returns p with its original replica set back; the
// replicas added leave the ISR, and the leadership moves where the leader
// is one of them. It refuses where no original replica is in the ISR, or
// none that is alive could take over the leadership: that would need an
// unclean election, which is not a cancel's to make.
func cancelReassignment(img *Image, p Partition) (Partition, error) {
	if !p.Reassigning() {
		return Partition{}, ErrNoReassignmentInProgress
	}
	orig := p.Original()
	isr := minus(p.ISR, p.AddingReplicas)
	if len(isr) == 0 {
		return Partition{}, fmt.Errorf("%w: no replica of the original set %v is in the ISR %v", ErrInvalidReplicaAssignment, orig, p.ISR)
	}
	leader := p.Leader
	if !slices.Contains(orig, leader) {
		leader = firstAlive(img, orig, -1, func(r int32) bool { return slices.Contains(isr, r) })
		if leader < 0 {
			return Partition{}, fmt.Errorf("%w: no live replica of the original set %v is in the ISR %v", ErrInvalidReplicaAssignment, orig, p.ISR)
		}
		p.LeaderEpoch = bumped(p.LeaderEpoch)
	}
	p.Replicas, p.ISR, p.Leader = slices.Clone(orig), slices.Clone(isr), leader
	p.AddingReplicas, p.RemovingReplicas, p.OriginalReplicas = nil, nil, nil
	return p, nil
}

// The topic configs that name the replicas a replication throttle holds
// back (KIP-73): "*" or partition:broker pairs.
var throttledReplicasConfigs = []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}

// endThrottles returns configs without the partition:broker pairs that
// name partition, for a move of it that ended: the throttle a tool set
// for the move ends with it even when nobody comes back to remove it. A
// "*" is the operator's, not a move's, and stays. It returns configs
// itself when nothing changes, a new map otherwise.
func endThrottles(configs map[string]string, partition int32) map[string]string {
	out, cloned := configs, false
	prefix := strconv.Itoa(int(partition)) + ":"
	for _, name := range throttledReplicasConfigs {
		v, ok := configs[name]
		if !ok || strings.TrimSpace(v) == "*" {
			continue
		}
		pairs := strings.Split(v, ",")
		kept := slices.DeleteFunc(slices.Clone(pairs), func(pair string) bool {
			return strings.HasPrefix(strings.TrimSpace(pair), prefix)
		})
		if len(kept) == len(pairs) {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(configs), true
		}
		if len(kept) == 0 {
			delete(out, name)
		} else {
			out[name] = strings.Join(kept, ",")
		}
	}
	return out
}

// samePlacement reports whether p and q have the same replicas, ISR,
// leader and reassignment.
func samePlacement(p, q Partition) bool {
	return p.Leader == q.Leader && p.LeaderEpoch == q.LeaderEpoch &&
		slices.Equal(p.Replicas, q.Replicas) && slices.Equal(p.ISR, q.ISR) &&
		slices.Equal(p.AddingReplicas, q.AddingReplicas) && slices.Equal(p.RemovingReplicas, q.RemovingReplicas) &&
		slices.Equal(p.OriginalReplicas, q.OriginalReplicas)
}
