package admin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// healthyCluster is three alive brokers, a quorum led by 1 and one
// partition replicated on all three.
func healthyCluster() healthFacts {
	return healthFacts{
		cluster: ClusterDescription{
			Brokers: []BrokerDescription{
				{ID: 1, Host: "h1", Port: 9092, State: BrokerAlive},
				{ID: 2, Host: "h2", Port: 9092, State: BrokerAlive},
				{ID: 3, Host: "h3", Port: 9092, State: BrokerAlive},
			},
			Quorum: &QuorumDescription{Leader: 1, Epoch: 4, Members: []QuorumMember{{ID: 1, Voter: true}, {ID: 2, Voter: true}, {ID: 3, Voter: true}}},
		},
		partitions: []healthPartition{{Topic: "orders", Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}},
	}
}

func TestHealthFindsEachKindOfProblem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*healthFacts)
		maxLag time.Duration
		want   []HealthProblem // kind and the fields that place it; Detail checked to mention the place
	}{
		{name: "healthy", change: func(*healthFacts) {}},
		{name: "offline partition", change: func(f *healthFacts) {
			f.partitions[0].Leader, f.partitions[0].ISR = -1, nil
		}, want: []HealthProblem{{Kind: ProblemOfflinePartition, Topic: "orders", Partition: 0, Broker: -1}}},
		{name: "under-replicated partition", change: func(f *healthFacts) {
			f.partitions[0].ISR = []int32{1, 2}
		}, want: []HealthProblem{{Kind: ProblemUnderReplicated, Topic: "orders", Partition: 0, Broker: 1}}},
		{name: "fenced broker and what it leaves under-replicated", change: func(f *healthFacts) {
			f.cluster.Brokers[2].State = BrokerFenced
			f.partitions[0].ISR = []int32{1, 2}
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 3}, {Kind: ProblemUnderReplicated, Topic: "orders", Partition: 0, Broker: 1}}},
		{name: "a broker shutting down is no problem", change: func(f *healthFacts) {
			f.cluster.Brokers[1].State = BrokerShuttingDown
		}},
		{name: "failing log directory", change: func(f *healthFacts) {
			f.cluster.Brokers[1].LogDirs = []LogDirDescription{{Path: "/var/lib/mq", Failing: true, Error: "no space left on device"}}
		}, want: []HealthProblem{{Kind: ProblemFailingLogDir, Partition: -1, Broker: 2}}},
		{name: "no active controller", change: func(f *healthFacts) {
			f.cluster.Quorum.Leader = -1
		}, want: []HealthProblem{{Kind: ProblemNoQuorum, Partition: -1, Broker: -1}}},
		{name: "leader in contact with a minority", change: func(f *healthFacts) {
			f.cluster.Brokers[1].State = BrokerFenced
			f.cluster.Brokers[2].State = BrokerFenced
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 2}, {Kind: ProblemFencedBroker, Partition: -1, Broker: 3},
			{Kind: ProblemNoQuorum, Partition: -1, Broker: 1}}},
		{name: "one voter of three lost keeps the quorum", change: func(f *healthFacts) {
			f.cluster.Brokers[2].State = BrokerFenced
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 3}}},
		{name: "non-voters do not count", change: func(f *healthFacts) {
			f.cluster.Quorum.Members = []QuorumMember{{ID: 1, Voter: true}, {ID: 2}, {ID: 3}}
		}},
		{name: "quorum not described by a broker without DescribeQuorum", change: func(f *healthFacts) {
			f.cluster.Quorum, f.cluster.QuorumError = nil, quorumUnavailable
		}},
		{name: "quorum could not be described", change: func(f *healthFacts) {
			f.cluster.Quorum, f.cluster.QuorumError = nil, "REQUEST_TIMED_OUT"
		}, want: []HealthProblem{{Kind: ProblemUnknownQuorum, Partition: -1, Broker: -1}}},
		{name: "group over --max-lag", maxLag: time.Minute, change: func(f *healthFacts) {
			f.groups = GroupDescriptions{{Group: "billing", Partitions: []GroupPartition{
				{Topic: "orders", Partition: 0, Lag: 7, LagTimeMillis: 61_000},
				{Topic: "orders", Partition: 1, Lag: 1, LagTimeMillis: 60_000}, // at the limit: fine
				{Topic: "orders", Partition: 2, Lag: -1, LagTimeMillis: -1},    // unknown: not judged
			}}}
		}, want: []HealthProblem{{Kind: ProblemLaggingGroup, Topic: "orders", Partition: 0, Broker: -1, Group: "billing", LagTimeMillis: 61_000}}},
		{name: "lag not checked without --max-lag", change: func(f *healthFacts) {
			f.groups = GroupDescriptions{{Group: "billing", Partitions: []GroupPartition{{Topic: "orders", Lag: 7, LagTimeMillis: 3_600_000}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyCluster()
			tc.change(&f)
			h := assessHealth(f, tc.maxLag)
			if h.Healthy != (len(tc.want) == 0) {
				t.Errorf("healthy = %v with problems %+v", h.Healthy, h.Problems)
			}
			if len(h.Problems) != len(tc.want) {
				t.Fatalf("problems %+v, want %+v", h.Problems, tc.want)
			}
			for i, got := range h.Problems {
				want := tc.want[i]
				if want.LagTimeMillis == 0 {
					want.LagTimeMillis = -1
				}
				detail := got.Detail
				got.Detail = ""
				if got != want {
					t.Errorf("problem %d: %+v, want %+v", i, got, want)
				}
				if detail == "" || (want.Topic != "" && !strings.Contains(detail, want.Topic)) || (want.Group != "" && !strings.Contains(detail, want.Group)) {
					t.Errorf("problem %d: detail %q does not say where", i, detail)
				}
			}
		})
	}
}

func TestHealthPrintsOneLinePerProblemOrOneSayingHealthy(t *testing.T) {
	var out bytes.Buffer
	if err := assessHealth(healthyCluster(), 0).WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "healthy: 3 brokers alive, 1 partition fully replicated\n" {
		t.Errorf("healthy table %q", got)
	}
	f := healthyCluster()
	f.cluster.Brokers[2].State = BrokerFenced
	f.partitions[0].ISR = []int32{1, 2}
	h := assessHealth(f, 0)
	out.Reset()
	if err := h.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := "fenced broker 3 (h3:9092): the controller stopped hearing from it\n" +
		"under-replicated partition orders/0: in sync 1,2 of replicas 1,2,3 (leader 1)\n"
	if got := out.String(); got != want {
		t.Errorf("degraded table:\n%s\nwant:\n%s", got, want)
	}
}

// The JSON shape is documented (mqctl cluster health --help): every field
// of every problem is present, problems is [] when healthy.
func TestHealthJSONKeepsItsShape(t *testing.T) {
	b, err := json.Marshal(assessHealth(healthyCluster(), 0))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"healthy":true,"problems":[]}` {
		t.Errorf("healthy JSON %s", b)
	}
	f := healthyCluster()
	f.partitions[0].Leader = -1
	b, _ = json.Marshal(assessHealth(f, 0))
	want := `{"healthy":false,"problems":[{"kind":"offline_partition","topic":"orders","partition":0,"broker":-1,"group":"","lag_time_ms":-1,"detail":"offline partition orders/0: no leader (replicas 1,2,3, in sync 1,2,3)"}]}`
	if string(b) != want {
		t.Errorf("degraded JSON\n%s\nwant\n%s", b, want)
	}
}
