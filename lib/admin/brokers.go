package admin

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeBrokers is the part of DescribeCluster that a live view reads
// every refresh: the cluster id, the controller, and each broker (fenced
// ones too) with its address, rack, state and the partitions it leads.
// It leaves out what may wait for a broker that is gone or for a
// controller without quorum (the quorum, each broker's APIs and log
// directories): it answers as long as one broker does.
func (a *Admin) DescribeBrokers(ctx context.Context) (*ClusterDescription, error) {
	md, err := a.adm.Metadata(ctx)
	if err != nil {
		return nil, requestError("cluster describe", err)
	}
	led := map[int32]int{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				led[p.Leader]++
			}
		}
	}
	states := map[int32]string{}
	var fenced []kadm.BrokerDetail
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeFencedBrokers = true
	if resp, err := dc.RequestWith(ctx, a.cl); err == nil && resp.ErrorCode == 0 {
		listed := map[int32]bool{}
		for _, b := range md.Brokers {
			listed[b.NodeID] = true
		}
		for _, b := range resp.Brokers {
			states[b.NodeID] = brokerState(b)
			if !listed[b.NodeID] {
				fenced = append(fenced, kadm.BrokerDetail{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
			}
		}
	}
	d := ClusterDescription{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []BrokerDescription{}, now: a.now()}
	for _, b := range append(slices.Clone(md.Brokers), fenced...) {
		d.Brokers = append(d.Brokers, BrokerDescription{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack,
			Controller: b.NodeID == md.Controller, State: cmp.Or(states[b.NodeID], BrokerAlive), PartitionsLed: led[b.NodeID],
			Version: "unknown", APIs: []APIVersion{}, LogDirs: []LogDirDescription{}})
	}
	slices.SortFunc(d.Brokers, func(x, y BrokerDescription) int { return int(x.ID) - int(y.ID) })
	return &d, nil
}
