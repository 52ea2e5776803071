package partition

import (
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
)

// SkipDamaged gives up, on the leader of partition index of t, the
// damaged range holding offset, or (offset < 0) every damaged range not
// skipped yet, and returns what it skipped (each range's offsets are
// lost). ErrUnknownPartition, or ErrNotHosted when this node does not
// lead it.
func (m *Manager) SkipDamaged(t *controller.Topic, index int32, offset int64) ([]log.Damage, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, ErrUnknownPartition
	}
	h := m.Replica(t, index)
	if h == nil || !h.IsLeader() {
		return nil, ErrNotHosted
	}
	l := h.Log()
	if offset >= 0 {
		d, err := l.SkipDamaged(offset)
		if err != nil {
			return nil, err
		}
		return []log.Damage{d}, nil
	}
	var out []log.Damage
	for _, d := range l.Damaged() {
		if d.Skipped {
			continue
		}
		s, err := l.SkipDamaged(d.From)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}
