package partition

import (
	"net"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/peer"
)

func TestLeaderGoneNamesOnlyTopicsLedByAGoneBrokerWithinTheHold(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	clk := clock.NewManual(time.Unix(1000, 0))
	w := peer.NewWatch(clk, nil)
	m := &Manager{cfg: Config{Settings: config.Broker{NodeID: 1}, Watch: w}, clock: clk}
	img := &controller.Image{Topics: map[string]*controller.Topic{
		"by2":  {Name: "by2", Partitions: []controller.Partition{{ID: 0, Leader: 3}, {ID: 1, Leader: 2}}},
		"by3":  {Name: "by3", Partitions: []controller.Partition{{ID: 0, Leader: 3}}},
		"none": {Name: "none", Partitions: []controller.Partition{{ID: 0, Leader: -1}}},
	}}
	if m.LeaderGone(img, nil) {
		t.Fatal("a leader is gone before any connection broke")
	}
	w.Lost(2, refused)
	for _, c := range []struct {
		topics []string
		want   bool
	}{
		{nil, true},
		{[]string{}, false},
		{[]string{"by2"}, true},
		{[]string{"by3", "none", "missing"}, false},
		{[]string{"by3", "by2"}, true},
	} {
		if got := m.LeaderGone(img, c.topics); got != c.want {
			t.Errorf("LeaderGone(%q) = %v, want %v", c.topics, got, c.want)
		}
	}
	// This node's own partitions are never held for.
	m.cfg.Settings.NodeID = 2
	if m.LeaderGone(img, nil) {
		t.Error("this node's own leadership counts as gone")
	}
	m.cfg.Settings.NodeID = 1
	// The hold ends: the answer goes out as the image is.
	clk.Advance(goneLeaderHold)
	if m.LeaderGone(img, nil) {
		t.Errorf("still held %v after the loss", goneLeaderHold)
	}
	if (&Manager{cfg: Config{}, clock: clk}).LeaderGone(img, nil) {
		t.Error("a node without a watch holds")
	}
}
