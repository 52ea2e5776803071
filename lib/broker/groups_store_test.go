package broker

import (
	"testing"

	"github.com/mqproject/mq/lib/controller"
)

func TestOffsetsTopicReplicationFactorIsBoundedByRegisteredBrokers(t *testing.T) {
	brokers := func(n int) *controller.Image {
		img := &controller.Image{Brokers: map[int32]controller.Broker{}}
		for i := range n {
			img.Brokers[int32(i+1)] = controller.Broker{ID: int32(i + 1)}
		}
		return img
	}
	for _, tc := range []struct {
		setting int16
		brokers int
		want    int16
	}{
		{3, 1, 1},
		{3, 2, 2},
		{3, 3, 3},
		{3, 5, 3},
		{1, 3, 1},
		{5, 4, 4},
		{3, 0, 1}, // nobody registered yet: this node will be
	} {
		if got := offsetsReplicationFactor(tc.setting, brokers(tc.brokers)); got != tc.want {
			t.Errorf("offsets.topic.replication.factor=%d with %d brokers: %d replicas, want %d", tc.setting, tc.brokers, got, tc.want)
		}
	}
}
