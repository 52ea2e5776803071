package broker

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/server"
)

// extensionAPIs lists mq's own APIs (lib/kafkaext) and the versions
// implemented.
func (b *Broker) extensionAPIs() map[int16]api {
	return map[int16]api{
		kafkaext.SkipDamagedKey: {0, 0, b.handleSkipDamaged},
		kafkaext.RefetchKey:     {0, 0, b.handleRefetch},
	}
}

// NewRequest implements server.RequestMaker: the requests of mq's own API
// keys.
func (b *Broker) NewRequest(key int16) kmsg.Request { return kafkaext.NewRequest(key) }

// handleSkipDamaged gives up damaged ranges of partitions this node leads,
// on an operator's explicit request (mqctl records skip-damaged): each one
// is logged with who asked.
func (b *Broker) handleSkipDamaged(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kafkaext.SkipDamagedRequest)
	resp := &kafkaext.SkipDamagedResponse{Version: req.Version, Partitions: []kafkaext.SkipDamagedPartitionResponse{}}
	img := b.ctrl.Image()
	t := img.Topics[r.Topic]
	for _, rp := range r.Partitions {
		pr := kafkaext.SkipDamagedPartitionResponse{Partition: rp.Partition, Skipped: []kafkaext.DamagedRange{}}
		skipped, err := b.parts.SkipDamaged(t, rp.Partition, rp.Offset)
		for _, d := range skipped {
			pr.Skipped = append(pr.Skipped, damagedRange(d))
			b.log.Warn("damaged range skipped on request: its offsets are lost",
				"topic", r.Topic, "partition", rp.Partition, "from_offset", d.From, "to_offset", d.To,
				"client_id", clientID(req), "remote", remoteString(c))
		}
		if pr.ErrorCode = skipDamagedError(err); err != nil {
			pr.ErrorMessage = err.Error()
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return reply(resp)
}

// handleRefetch answers followers of partitions this node leads that
// found damage in their logs and ask leave to cut them before it
// (replica.Partition.GrantRefetch).
func (b *Broker) handleRefetch(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kafkaext.RefetchRequest)
	resp := &kafkaext.RefetchResponse{Version: req.Version, Partitions: []kafkaext.RefetchPartitionResponse{}}
	img := b.ctrl.Image()
	allowed := b.speaksAsReplica(c, r.ReplicaID)
	for _, rp := range r.Partitions {
		pr := kafkaext.RefetchPartitionResponse{Topic: rp.Topic, Partition: rp.Partition}
		if !allowed {
			pr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Partitions = append(resp.Partitions, pr)
			continue
		}
		h, err := b.parts.Leader(img.Topics[rp.Topic], rp.Partition)
		if err == nil {
			pr.Granted, err = h.GrantRefetch(r.ReplicaID, rp.LeaderEpoch, rp.Offset)
		}
		if err == nil {
			level := slog.LevelDebug // refused: asked again until granted
			if pr.Granted {
				level = slog.LevelInfo
			}
			b.log.Log(ctx, level, "follower with a damaged log asks to cut it", "partition", h.String(),
				"follower", r.ReplicaID, "offset", rp.Offset, "granted", pr.Granted)
		}
		if pr.ErrorCode = fetchError(err); err != nil {
			pr.ErrorMessage = err.Error()
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return reply(resp)
}

// speaksAsReplica reports whether the connection c may fetch, or ask a
// Refetch, as broker replica. With security.inter.broker.protocol SSL
// only a connection whose client certificate is the one bound to that
// node ID (controller.Image.NodePrincipals) may: a client posing as a
// follower is refused CLUSTER_AUTHORIZATION_FAILED before anything is
// read. Otherwise any connection may, and the partition decides whether
// replica is one of its followers (replica.ErrNotReplica).
func (b *Broker) speaksAsReplica(c *server.ConnInfo, replica int32) bool {
	if b.cfg.Settings.InterBrokerProtocol != "SSL" {
		return true
	}
	if c == nil || c.Principal == "" {
		return false
	}
	bound, ok := b.ctrl.Image().NodePrincipals[replica]
	return ok && bound == c.Principal
}

// damagedRange is a log.Damage as mq's tools see it.
func damagedRange(d log.Damage) kafkaext.DamagedRange {
	return kafkaext.DamagedRange{FromOffset: d.From, ToOffset: d.To, Segment: d.Segment, Position: d.Position,
		Length: d.Length, Reason: d.Reason, DetectedMillis: d.Detected.UnixMilli(), Skipped: d.Skipped}
}

func remoteString(c *server.ConnInfo) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	return c.Remote.String()
}
