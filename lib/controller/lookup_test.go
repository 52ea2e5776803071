package controller

import (
	"slices"
	"testing"
)

func TestCurrentLeaderOfAPartition(t *testing.T) {
	topic := &Topic{Name: "t", Partitions: []Partition{{ID: 0, Leader: 2, LeaderEpoch: 7}, {ID: 1, Leader: -1, LeaderEpoch: 3}}}
	for _, tc := range []struct {
		name          string
		t             *Topic
		p             int32
		leader, epoch int32
	}{
		{"led", topic, 0, 2, 7},
		{"leaderless", topic, 1, -1, 3},
		{"no such partition", topic, 2, -1, -1},
		{"negative partition", topic, -1, -1, -1},
		{"no topic", nil, 0, -1, -1},
	} {
		if leader, epoch := tc.t.CurrentLeader(tc.p); leader != tc.leader || epoch != tc.epoch {
			t.Errorf("%s: CurrentLeader = %d, %d; want %d, %d", tc.name, leader, epoch, tc.leader, tc.epoch)
		}
	}
}

func TestAddingLeavesOutReplicasAlsoRemoved(t *testing.T) {
	p := Partition{Replicas: []int32{4, 5, 1, 2}, AddingReplicas: []int32{4, 5}, RemovingReplicas: []int32{1, 2, 5}}
	if got := p.Adding(); !slices.Equal(got, []int32{4}) {
		t.Fatalf("Adding = %v, want [4]", got)
	}
	if got := (Partition{Replicas: []int32{1}}).Adding(); got != nil {
		t.Fatalf("Adding without a reassignment = %v, want nil", got)
	}
}

func TestForSchemeSkipsListenersWithoutAPort(t *testing.T) {
	br := Broker{ID: 1, Host: "mq1.example", Port: 9092, Listeners: []string{"ssl://:0", "ssl://bad", "ssl://[::]:9093"}}
	if got := br.ForScheme("ssl"); got.Host != "mq1.example" || got.Port != 9093 {
		t.Fatalf("ForScheme(ssl) = %s:%d, want mq1.example:9093", got.Host, got.Port)
	}
	if got := br.ForScheme("sasl_ssl"); got.Host != br.Host || got.Port != br.Port {
		t.Fatalf("ForScheme(sasl_ssl) = %s:%d, want the advertised address", got.Host, got.Port)
	}
}
