package controller

import (
	"errors"
	"slices"
	"testing"
)

func requestImage() *Image {
	t := &Topic{Name: "t", ID: TopicID{1}, Partitions: []Partition{{ID: 0, Replicas: []int32{1, 2}}}}
	internal := &Topic{Name: "__consumer_offsets", ID: TopicID{2}, Partitions: []Partition{{ID: 0, Replicas: []int32{1}}}, Internal: true}
	return &Image{
		Brokers:    map[int32]Broker{1: {ID: 1}, 2: {ID: 2}},
		Topics:     map[string]*Topic{"t": t, internal.Name: internal},
		TopicsByID: map[TopicID]*Topic{t.ID: t, internal.ID: internal},
	}
}

func TestNewTopicChecksTheRequest(t *testing.T) {
	img := requestImage()
	cmd, err := img.NewTopic(TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1}, 3, 2)
	if err != nil || cmd.Partitions != 3 || cmd.ReplicationFactor != 2 {
		t.Errorf("defaults: %+v %v", cmd, err)
	}
	cmd, err = img.NewTopic(TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{
		{Partition: 1, Replicas: []int32{2, 1}}, {Partition: 0, Replicas: []int32{1, 2}},
	}}, 3, 2)
	if err != nil || !slices.EqualFunc(cmd.Assignments, [][]int32{{1, 2}, {2, 1}}, slices.Equal[[]int32]) || cmd.Partitions != 2 || cmd.ReplicationFactor != 2 {
		t.Errorf("assignments: %+v %v", cmd, err)
	}
	for _, c := range []struct {
		r    TopicRequest
		want error
	}{
		{TopicRequest{Name: "__transaction_state", Partitions: 1, ReplicationFactor: 1}, ErrInternalTopic},
		{TopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}, ErrTopicExists},
		{TopicRequest{Name: "n", Partitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
		{TopicRequest{Name: "n", Partitions: 1, ReplicationFactor: 0}, ErrInvalidReplicationFactor},
		{TopicRequest{Name: "n", Partitions: 1, ReplicationFactor: 3}, ErrInvalidReplicationFactor},
		{TopicRequest{Name: "n", Partitions: 1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}}}, ErrInvalidRequest},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{1, []int32{1}}}}, ErrInvalidReplicaAssignment},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}, {0, []int32{2}}}}, ErrInvalidReplicaAssignment},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1, 1}}}}, ErrInvalidReplicaAssignment},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{3}}}}, ErrInvalidReplicaAssignment},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, nil}}}, ErrInvalidReplicaAssignment},
		{TopicRequest{Name: "n", Partitions: -1, ReplicationFactor: -1, Assignments: []Assignment{{0, []int32{1}}, {1, []int32{1, 2}}}}, ErrInvalidReplicaAssignment},
	} {
		if _, err := img.NewTopic(c.r, 1, 1); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.r, err, c.want)
		}
	}
}

func TestNewPartitionsChecksTheRequest(t *testing.T) {
	img := requestImage()
	if current, err := img.NewPartitions("t", 3, [][]int32{{2, 1}, {1, 2}}); err != nil || current != 1 {
		t.Errorf("grow: %d %v", current, err)
	}
	for _, c := range []struct {
		topic       string
		count       int32
		assignments [][]int32
		want        error
	}{
		{"missing", 2, nil, ErrUnknownTopic},
		{"__consumer_offsets", 2, nil, ErrInternalTopic},
		{"t", 1, nil, ErrInvalidPartitions},
		{"t", 0, nil, ErrInvalidPartitions},
		{"t", 3, [][]int32{{1, 2}}, ErrInvalidReplicaAssignment},
		{"t", 2, [][]int32{{1}}, ErrInvalidReplicaAssignment},
		{"t", 2, [][]int32{{1, 3}}, ErrInvalidReplicaAssignment},
	} {
		if _, err := img.NewPartitions(c.topic, c.count, c.assignments); !errors.Is(err, c.want) {
			t.Errorf("%s to %d %v: %v, want %v", c.topic, c.count, c.assignments, err, c.want)
		}
	}
	delete(img.Brokers, 2)
	if _, err := img.NewPartitions("t", 2, nil); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Errorf("too few brokers: %v", err)
	}
}

func TestTopicToDeleteRefusesInternalTopics(t *testing.T) {
	img := requestImage()
	name := "t"
	if topic, err := img.TopicToDelete(&name, TopicID{}); err != nil || topic.Name != "t" {
		t.Errorf("by name: %v %v", topic, err)
	}
	if topic, err := img.TopicToDelete(nil, TopicID{1}); err != nil || topic.Name != "t" {
		t.Errorf("by id: %v %v", topic, err)
	}
	if _, err := img.TopicToDelete(nil, TopicID{9}); !errors.Is(err, ErrUnknownTopicID) {
		t.Errorf("unknown id: %v", err)
	}
	missing := "missing"
	if _, err := img.TopicToDelete(&missing, TopicID{}); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown name: %v", err)
	}
	if topic, err := img.TopicToDelete(nil, TopicID{2}); !errors.Is(err, ErrInternalTopic) || topic == nil {
		t.Errorf("internal: %v %v", topic, err)
	}
}
