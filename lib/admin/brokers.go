package admin

import (
	"context"
	"slices"

	"github.com/mqproject/mq/lib/client"
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

// BrokerLoad is one broker in broker describe: what it holds.
type BrokerLoad struct {
	ID    int32   `json:"id"`
	Host  string  `json:"host"`
	Port  int32   `json:"port"`
	Rack  *string `json:"rack"` // null: none
	State string  `json:"state"`
	// Replicas counts the partitions it holds a replica of, Leaders those
	// it leads, PreferredLeaders those whose first replica it is.
	Replicas         int `json:"replicas"`
	Leaders          int `json:"leaders"`
	PreferredLeaders int `json:"preferred_leaders"`
	// Bytes is what its replicas hold on disk (DescribeLogDirs); -1 when
	// it did not answer, BytesError says why.
	Bytes      int64  `json:"bytes"`
	BytesError string `json:"bytes_error,omitempty"`
}

// BrokerLoads is the result of broker describe, sorted by id.
type BrokerLoads []BrokerLoad

// Table implements Result.
func (ls BrokerLoads) Table() ([]string, [][]string) {
	rows := make([][]string, len(ls))
	for i, l := range ls {
		rack := "-"
		if l.Rack != nil {
			rack = *l.Rack
		}
		bytes := sizeText(l.Bytes)
		if l.BytesError != "" {
			bytes = "? (" + l.BytesError + ")"
		}
		rows[i] = []string{itoa(l.ID), rack, l.State, itoa(l.Replicas), itoa(l.Leaders), itoa(l.PreferredLeaders), bytes}
	}
	return []string{"BROKER", "RACK", "STATE", "REPLICAS", "LEADERS", "PREFERRED", "BYTES"}, rows
}

// DescribeBrokerLoads describes what each broker (or only broker, when
// it is 0 or more) holds: replicas, leaderships, preferred leaderships
// and bytes on disk, with its rack and state as cluster describe has
// them (DescribeBrokers). An unknown broker is a failure.
func (a *Admin) DescribeBrokerLoads(ctx context.Context, broker int32) (BrokerLoads, error) {
	const what = "broker describe"
	d, err := a.DescribeBrokers(ctx)
	if err != nil {
		return nil, err
	}
	md, err := a.adm.Metadata(ctx)
	if err != nil {
		return nil, requestError(what, err)
	}
	out := BrokerLoads{}
	var ids []int32
	for _, b := range d.Brokers {
		if broker >= 0 && b.ID != broker {
			continue
		}
		out = append(out, BrokerLoad{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, State: b.State})
		ids = append(ids, b.ID)
	}
	if len(out) == 0 {
		return nil, client.Failf("%s: broker %d is not in the cluster", what, broker)
	}
	topics := map[string][]int32{}
	for t, td := range md.Topics {
		for p, pd := range td.Partitions {
			topics[t] = append(topics[t], p)
			for i := range out {
				l := &out[i]
				if slices.Contains(pd.Replicas, l.ID) {
					l.Replicas++
				}
				if pd.Leader == l.ID {
					l.Leaders++
				}
				if len(pd.Replicas) > 0 && pd.Replicas[0] == l.ID {
					l.PreferredLeaders++
				}
			}
		}
	}
	var ask []int32
	for _, l := range out {
		if l.State != BrokerFenced {
			ask = append(ask, l.ID)
		}
	}
	dirs := a.describeLogDirs(ctx, ask, topics)
	for i := range out {
		l := &out[i]
		if l.State == BrokerFenced {
			l.Bytes, l.BytesError = -1, "not asked: the broker is fenced"
			continue
		}
		if e, ok := dirs.errs[l.ID]; ok {
			l.Bytes, l.BytesError = -1, e
			continue
		}
		for _, ps := range dirs.sizes {
			for _, bySize := range ps {
				l.Bytes += bySize[l.ID]
			}
		}
	}
	return out, nil
}
