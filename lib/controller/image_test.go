package controller

import "testing"

func TestOfflinePartitionsAreThoseWithoutALiveLeader(t *testing.T) {
	img := &Image{
		Brokers: map[int32]Broker{
			1: {ID: 1},
			2: {ID: 2, Fenced: true},
			3: {ID: 3, InControlledShutdown: true},
		},
		Topics: map[string]*Topic{
			"t": {Name: "t", Partitions: []Partition{
				{ID: 0, Leader: 1},  // live
				{ID: 1, Leader: -1}, // no leader
				{ID: 2, Leader: 2},  // fenced
				{ID: 3, Leader: 3},  // still serving while its leaderships move
				{ID: 4, Leader: 9},  // not registered
			}},
		},
	}
	if got := img.OfflinePartitions(); got != 3 {
		t.Errorf("OfflinePartitions = %d, want 3", got)
	}
}
