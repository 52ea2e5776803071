package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/vfs"
)

// ConfigError is a configuration that cannot work: voters that do not
// include this node and no Raft address to join with, a data directory of
// another node or cluster, voters that disagree. mqd exits 2 on it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// raftAddress is this node's Raft address: none for a lone node (its
// quorum is in memory), its entry in the voters for a voter, and
// controller.raft.address for a non-voter, which needs one.
func raftAddress(s config.Broker, voters []controller.Voter) (string, error) {
	if len(voters) == 0 {
		return "", nil
	}
	i := slices.IndexFunc(voters, func(v controller.Voter) bool { return v.ID == s.NodeID })
	if i >= 0 {
		if s.RaftAddress != "" && s.RaftAddress != voters[i].Addr {
			return "", &ConfigError{fmt.Errorf("node %d is voter %s, but controller.raft.address says %s: give one address",
				s.NodeID, voters[i], s.RaftAddress)}
		}
		return voters[i].Addr, nil
	}
	if s.RaftAddress == "" {
		return "", &ConfigError{fmt.Errorf("node %d is not one of the voters %s: add it to --voters, or give it --raft-address HOST:PORT to join as a non-voter",
			s.NodeID, s.Voters)}
	}
	for _, v := range voters {
		if v.Addr == s.RaftAddress {
			return "", &ConfigError{fmt.Errorf("--raft-address %s is voter %d's address, and this node is %d", s.RaftAddress, v.ID, s.NodeID)}
		}
	}
	return s.RaftAddress, nil
}

// metaFileName records which node and cluster a data directory belongs
// to, in Kafka's meta.properties format.
const metaFileName = "meta.properties"

// checkMeta compares the node ID and cluster ID (when known: not empty)
// with those recorded in meta.properties in dir of fsys, records them
// when missing, and refuses a directory of another node or cluster.
func checkMeta(fsys vfs.FS, dir string, nodeID int32, clusterID string) error {
	path := filepath.Join(dir, metaFileName)
	props := map[string]string{}
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return &ConfigError{fmt.Errorf("%s: bad line %q", path, line)}
			}
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	changed := false
	if v, ok := props["node.id"]; ok {
		if v != strconv.Itoa(int(nodeID)) {
			return &ConfigError{fmt.Errorf("data directory %s belongs to node %s, not node %d (%s)", dir, v, nodeID, path)}
		}
	} else {
		props["node.id"], changed = strconv.Itoa(int(nodeID)), true
	}
	if clusterID != "" {
		if v, ok := props["cluster.id"]; ok && v != clusterID {
			return &ConfigError{fmt.Errorf("data directory %s belongs to cluster %s, not cluster %s (%s)", dir, v, clusterID, path)}
		} else if !ok {
			props["cluster.id"], changed = clusterID, true
		}
	}
	if !changed {
		return nil
	}
	props["version"] = "1"
	var out strings.Builder
	out.WriteString("# which node and cluster this data directory belongs to; written by mqd\n")
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&out, "%s=%s\n", k, props[k])
	}
	return vfs.WriteFileAtomic(fsys, path, []byte(out.String()), 0o640)
}

// checkClusterID checks the data directory against the cluster ID once
// the image has one. It reports a conflict as a ConfigError.
func (d *Daemon) checkClusterID() error {
	id := d.ctrl.Image().ClusterID
	if id == "" || d.clusterIDChecked {
		return nil
	}
	if err := checkMeta(vfs.OS, d.settings.DataDir, d.settings.NodeID, id); err != nil {
		return err
	}
	d.clusterIDChecked = true
	return nil
}

// registerRetry spaces the attempts of a registration whose outcome the
// controller could not tell.
const registerRetry = 100 * time.Millisecond

// register records this broker with the controller (forwarded to the
// active one) and keeps the epoch it was given. The first registration
// names the replicas that lost committed records (d.lost). A registration
// the controller lost its leadership while committing (or could not
// reach a leader for: controller.ErrNotController) is sent again until
// ctx ends: the outcome is unknown, and registering twice only gives the
// broker the later epoch. A node restarted while the controller moves
// would otherwise exit.
func (d *Daemon) register(ctx context.Context) error {
	var epoch int64
	for {
		var err error
		if testHookRegister != nil {
			err = testHookRegister(d)
		}
		if err == nil {
			epoch, err = d.ctrl.RegisterBrokerAfterLoss(ctx, d.registration, d.lost)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, controller.ErrNotController) || ctx.Err() != nil {
			return fmt.Errorf("register broker %d: %w", d.settings.NodeID, err)
		}
		d.log.Info("registering again: the controller could not tell whether the registration was committed", "err", err)
		t := d.clock.NewTimer(registerRetry)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("register broker %d: %w", d.settings.NodeID, err)
		}
	}
	if d.lost != nil { // written only here, in Start: the heartbeat loop's registrations only read it
		d.lost = nil
	}
	d.brokerEpoch.Store(epoch)
	if d.parts != nil {
		d.parts.Registered(epoch) // the first registration lets the node lead
	}
	// The epoch is the Raft index of the registration: once this node's
	// image has it, the node knows everything decided before it joined
	// (a restarted node's image starts from its last snapshot and log,
	// and may be far behind), so Start does not finish on a stale image.
	if err := d.ctrl.AwaitVersion(ctx, uint64(epoch)); err != nil {
		return fmt.Errorf("register broker %d: catching up with the cluster metadata: %w", d.settings.NodeID, err)
	}
	return nil
}

// heartbeatInterval is broker.heartbeat.interval.ms.
func (d *Daemon) heartbeatInterval() time.Duration {
	if every := d.settings.BrokerHeartbeatInterval; every > 0 {
		return every
	}
	return 2 * time.Second
}

// startHeartbeat runs the heartbeat loop: every broker.heartbeat.interval.ms
// this broker tells the active controller it is alive and how far it has
// applied the image. It also watches for configuration conflicts found
// after start (Fatal).
func (d *Daemon) startHeartbeat() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stopHeartbeat = cancel
	d.heartbeatDone = make(chan struct{})
	// Made before the loop starts, so that the first heartbeat is due an
	// interval after Start returns, whenever the goroutine runs.
	t := d.clock.NewTicker(d.heartbeatInterval())
	go func() {
		defer close(d.heartbeatDone)
		defer t.Stop()
		failing, metaFailing := false, false
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-d.ctrl.Fatal():
				d.fail(&ConfigError{err})
				return
			case <-t.C():
			}
			// Only a conflict ends the node: a meta.properties that cannot
			// be written (a full disk) is tried again at the next tick.
			var conflict *ConfigError
			switch err := d.checkClusterID(); {
			case errors.As(err, &conflict):
				d.fail(err)
				return
			case err != nil && !metaFailing:
				d.log.Warn("cannot record the cluster id in the data directory; trying again", "err", err)
				metaFailing = true
			}
			_, err := d.heartbeat(ctx, false)
			switch {
			case err != nil && !failing && ctx.Err() == nil:
				d.log.Warn("heartbeat to the controller failed", "err", err)
				failing = true
			case err == nil && failing:
				d.log.Info("heartbeating to the controller again")
				failing = false
			}
		}
	}()
}

// startPrefetch runs the prefetch of the broker's producer IDs in a
// goroutine until closeParts stops it.
func (d *Daemon) startPrefetch() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stopPrefetch = cancel
	d.prefetchDone = make(chan struct{})
	go func() {
		defer close(d.prefetchDone)
		d.producerIDs.Run(ctx)
	}()
}

// fail reports a fatal conflict to whoever watches Fatal.
func (d *Daemon) fail(err error) {
	d.log.Error("configuration conflict", "err", err)
	select {
	case d.fatal <- err:
	default:
	}
}

// Fatal returns a channel that receives a *ConfigError when the node finds,
// while running, that its configuration conflicts with the cluster's (its
// voters differ from a peer's, its data directory belongs to another
// cluster). mqd shuts down and exits 2.
func (d *Daemon) Fatal() <-chan error { return d.fatal }

// heartbeat sends one heartbeat; a stale broker epoch (the controller lost
// or replaced our registration) registers again.
func (d *Daemon) heartbeat(ctx context.Context, wantShutDown bool) (controller.HeartbeatResult, error) {
	hctx, cancel := context.WithTimeout(ctx, d.heartbeatInterval())
	defer cancel()
	// Built at each send: a registration in between changes the epoch.
	send := func() (controller.HeartbeatResult, error) {
		return d.ctrl.Heartbeat(hctx, controller.Heartbeat{
			BrokerID:       d.settings.NodeID,
			BrokerEpoch:    d.brokerEpoch.Load(),
			AppliedVersion: d.ctrl.Image().Version,
			WantShutDown:   wantShutDown,
			Offline:        d.offlinePositions(),
		})
	}
	res, err := send()
	if errors.Is(err, controller.ErrStaleBrokerEpoch) {
		d.log.Info("registering again: the controller does not know this broker's epoch")
		if err := d.register(hctx); err != nil {
			return res, err
		}
		return send()
	}
	return res, err
}

// offlinePositions is how far this node's log goes of every partition it
// hosts that has no leader in its image: the active controller elects the
// most advanced live replica when it elects uncleanly. Nil when no hosted
// partition is offline.
func (d *Daemon) offlinePositions() []controller.ReplicaPosition {
	if d.parts == nil {
		return nil
	}
	img := d.ctrl.Image()
	var out []controller.ReplicaPosition
	for _, h := range d.parts.All() {
		t := img.Topics[h.Topic()]
		if t == nil || t.ID != h.TopicID() {
			continue
		}
		p := img.Partition(h.Topic(), h.Partition.Partition())
		if p == nil || p.Leader != -1 {
			continue
		}
		l := h.Log()
		out = append(out, controller.ReplicaPosition{
			Topic: h.Topic(), Partition: h.Partition.Partition(), LastEpoch: l.LatestEpoch(), EndOffset: l.EndOffset(),
		})
	}
	return out
}

// controlledShutdown moves this broker's leaderships away before it stops
// serving (controlled.shutdown.enable), when there is another broker to
// take them: it heartbeats with WantShutDown until the controller says
// nothing is left to move and this node's image shows it, or until
// controlled.shutdown.timeout.ms.
func (d *Daemon) controlledShutdown(ctx context.Context) {
	s := d.settings
	if !s.ControlledShutdown || d.ctrl == nil || d.parts == nil || d.stopHeartbeat == nil {
		return
	}
	if len(d.ctrl.Image().Brokers) <= 1 {
		return // nobody to hand over to
	}
	timeout := s.ControlledShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := d.clock.Now()
	d.log.Info("controlled shutdown: moving leaderships to other in-sync replicas", "led", d.movableLeaderships())
	tick := d.clock.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// With no controller to answer for a whole session timeout (the
	// quorum is gone: the other nodes are stopping too), nothing can move.
	patience := s.BrokerSessionTimeout
	if patience <= 0 {
		patience = 9 * time.Second
	}
	var failingSince time.Time
	for {
		res, err := d.heartbeat(ctx, true)
		if err == nil && res.ShouldShutDown && d.movableLeaderships() == 0 {
			d.log.Info("controlled shutdown: leaderships moved", "took", d.clock.Now().Sub(start).Round(time.Millisecond))
			return
		}
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = d.clock.Now()
		case d.clock.Now().Sub(failingSince) > patience:
			d.log.Warn("controlled shutdown: no controller answers; stopping without moving leaderships", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			d.log.Warn("controlled shutdown did not finish: stopping anyway", "still_led", d.movableLeaderships(), "err", err)
			return
		case <-tick.C():
		}
	}
}

// movableLeaderships counts the partitions this node leads, in its image,
// that have another in-sync replica to take over.
func (d *Daemon) movableLeaderships() int {
	self := d.settings.NodeID
	n := 0
	img := d.ctrl.Image()
	for _, t := range img.Topics {
		for _, p := range t.Partitions {
			if p.Leader == self && len(p.ISR) > 1 {
				n++
			}
		}
	}
	return n
}
