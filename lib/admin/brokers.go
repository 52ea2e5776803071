package admin

import (
	"context"
	"slices"
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
	r := a.roster(ctx, md)
	d := ClusterDescription{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []BrokerDescription{}, now: a.now()}
	for _, b := range r.brokers {
		d.Brokers = append(d.Brokers, r.describe(b, md.Controller))
	}
	slices.SortFunc(d.Brokers, func(x, y BrokerDescription) int { return int(x.ID) - int(y.ID) })
	return &d, nil
}
