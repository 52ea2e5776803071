package partition

import (
	"math"
	"testing"

	"github.com/mqproject/mq/lib/config"
)

// TestCompactedTopicsRollByMaxCompactionLag: a compacted topic's active
// segment rolls by max.compaction.lag.ms when that comes before
// segment.ms; other topics roll by segment.ms alone.
func TestCompactedTopicsRollByMaxCompactionLag(t *testing.T) {
	for _, tc := range []struct {
		policy     string
		lag, segMS int64
		want       int64
	}{
		{"compact", 60000, 604800000, 60000},
		{"compact,delete", 60000, 604800000, 60000},
		{"compact", math.MaxInt64, 604800000, 604800000}, // Kafka's default: no lag bound
		{"compact", 604800000 * 2, 604800000, 604800000},
		{"delete", 60000, 604800000, 604800000},
	} {
		cfg, err := logConfig(config.Topic{CleanupPolicy: tc.policy, MaxCompactionLagMS: tc.lag, SegmentMS: tc.segMS,
			SegmentBytes: 1 << 20, FlushPolicy: "os", MessageTimestampType: "CreateTime"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.SegmentMS != tc.want {
			t.Errorf("%s, max.compaction.lag.ms %d, segment.ms %d: segments roll after %d ms, want %d", tc.policy, tc.lag, tc.segMS, cfg.SegmentMS, tc.want)
		}
	}
}
