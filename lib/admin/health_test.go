package admin

import (
	"bytes"
	"encoding/json"
	"reflect"
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
	orders0 := []HealthPartition{{Topic: "orders", Partition: 0}}
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
		{name: "a move's new replica not in sync yet is no problem (KIP-352)", change: func(f *healthFacts) {
			f.partitions[0].Replicas, f.partitions[0].Adding = []int32{1, 2, 3, 4}, []int32{4}
		}},
		{name: "a moving partition short of an original replica is", change: func(f *healthFacts) {
			f.partitions[0].Replicas, f.partitions[0].ISR, f.partitions[0].Adding = []int32{1, 2, 3, 4}, []int32{1, 2}, []int32{4}
		}, want: []HealthProblem{{Kind: ProblemUnderReplicated, Topic: "orders", Partition: 0, Broker: 1}}},
		{name: "fenced broker and what it leaves under-replicated", change: func(f *healthFacts) {
			f.cluster.Brokers[2].State = BrokerFenced
			f.partitions[0].ISR = []int32{1, 2}
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 3, Partitions: []HealthPartition{{Topic: "orders", Partition: 0}}}}},
		{name: "unreachable broker, not fenced yet, with the partitions it leads and follows", change: func(f *healthFacts) {
			f.cluster.Brokers[0].State, f.cluster.Brokers[0].Error = BrokerUnreachable, "unreachable: connection refused"
			f.cluster.Quorum.Leader = 2
			f.partitions = append(f.partitions, healthPartition{Topic: "__consumer_offsets", Partition: 3, Internal: true, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2, 1}},
				healthPartition{Topic: "orders", Partition: 1, Leader: 3, Replicas: []int32{3}, ISR: []int32{3}})
		}, want: []HealthProblem{{Kind: ProblemUnreachable, Partition: -1, Broker: 1, Partitions: []HealthPartition{
			{Topic: "orders", Partition: 0, Offline: true}, {Topic: "__consumer_offsets", Partition: 3}}}}},
		{name: "the quorum asked, no active controller answered", change: func(f *healthFacts) {
			f.cluster.Quorum, f.cluster.QuorumError, f.cluster.noQuorum = nil, "no active controller answered within 5s (asked through broker 1)", true
		}, want: []HealthProblem{{Kind: ProblemNoQuorum, Partition: -1, Broker: -1}}},
		{name: "unreachable voters are out of contact", change: func(f *healthFacts) {
			f.cluster.Brokers[1].State = BrokerUnreachable
			f.cluster.Brokers[2].State = BrokerUnreachable
			f.partitions = nil
		}, want: []HealthProblem{{Kind: ProblemUnreachable, Partition: -1, Broker: 2}, {Kind: ProblemUnreachable, Partition: -1, Broker: 3},
			{Kind: ProblemNoQuorum, Partition: -1, Broker: 1}}},
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
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 2, Partitions: orders0}, {Kind: ProblemFencedBroker, Partition: -1, Broker: 3, Partitions: orders0},
			{Kind: ProblemNoQuorum, Partition: -1, Broker: 1}}},
		{name: "one voter of three lost keeps the quorum", change: func(f *healthFacts) {
			f.cluster.Brokers[2].State = BrokerFenced
		}, want: []HealthProblem{{Kind: ProblemFencedBroker, Partition: -1, Broker: 3, Partitions: orders0}}},
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
		{name: "a group without members is not judged unless named", maxLag: time.Minute, change: func(f *healthFacts) {
			f.groups = GroupDescriptions{{Group: "gone", State: "Empty", Partitions: []GroupPartition{{Topic: "orders", Lag: 7, LagTimeMillis: 3_600_000}}}}
		}},
		{name: "a group without members named with --group", maxLag: time.Minute, change: func(f *healthFacts) {
			f.groups = GroupDescriptions{{Group: "gone", State: "Empty", Partitions: []GroupPartition{{Topic: "orders", Lag: 7, LagTimeMillis: 3_600_000}}}}
			f.namedGroups = true
		}, want: []HealthProblem{{Kind: ProblemLaggingGroup, Topic: "orders", Partition: 0, Broker: -1, Group: "gone", LagTimeMillis: 3_600_000}}},
		{name: "lag that could not be read", maxLag: time.Minute, change: func(f *healthFacts) {
			f.groupsErr = "no answer within the timeout"
		}, want: []HealthProblem{{Kind: ProblemUnknownLag, Partition: -1, Broker: -1}}},
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
				detail, parts := got.Detail, got.Partitions
				got.Detail, got.Partitions = "", nil
				if want.Partitions == nil {
					want.Partitions = []HealthPartition{}
				}
				if len(parts) != len(want.Partitions) {
					t.Errorf("problem %d: partitions %+v, want %+v", i, parts, want.Partitions)
				}
				for j := range min(len(parts), len(want.Partitions)) {
					if parts[j].Topic != want.Partitions[j].Topic || parts[j].Partition != want.Partitions[j].Partition || parts[j].Offline != want.Partitions[j].Offline {
						t.Errorf("problem %d: partition %d %+v, want %+v", i, j, parts[j], want.Partitions[j])
					}
				}
				want.Partitions = nil
				if !reflect.DeepEqual(got, want) {
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
	f.partitions = append(f.partitions, healthPartition{Topic: "__consumer_offsets", Partition: 0, Internal: true, Leader: 3, Replicas: []int32{3, 1}, ISR: []int32{3, 1}},
		healthPartition{Topic: "audit", Partition: 0, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2}})
	h = assessHealth(f, 0)
	out.Reset()
	if err := h.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := "fenced broker 3 (h3:9092): the controller stopped hearing from it: 1 partition under-replicated, 1 user, 0 internal; " +
		"1 partition without a live leader, 0 user, 1 internal\n" +
		"under-replicated partition audit/0: in sync 2 of replicas 2,1 (leader 2)\n"
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
	want := `{"healthy":false,"problems":[{"kind":"offline_partition","topic":"orders","partition":0,"broker":-1,"group":"","lag_time_ms":-1,"detail":"offline partition orders/0: no leader (replicas 1,2,3, in sync 1,2,3)","partitions":[]}]}`
	if string(b) != want {
		t.Errorf("degraded JSON\n%s\nwant\n%s", b, want)
	}
}

func TestClusterDescriptionSaysWhenTheQuorumIsLost(t *testing.T) {
	c := healthyCluster().cluster
	if c.NoQuorum() {
		t.Error("a quorum led by 1 with every voter alive: NoQuorum")
	}
	c.Brokers[1].State, c.Brokers[2].State = BrokerUnreachable, BrokerFenced
	if !c.NoQuorum() {
		t.Error("the leader with no voter in contact: not NoQuorum")
	}
	c = healthyCluster().cluster
	c.Quorum, c.QuorumError, c.noQuorum = nil, "NOT_CONTROLLER: no leader within the deadline", true
	if !c.NoQuorum() {
		t.Error("NOT_CONTROLLER: not NoQuorum")
	}
}

// TestHealthReportsHungTransactions: a transaction open longer than its
// timeout and the grace the coordinator's abort check needs is a problem;
// one within it, or without a start, is not.
func TestHealthReportsHungTransactions(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	f := healthyCluster()
	f.now = now
	f.transactions = TxnDescriptions{
		{TransactionalID: "fresh", State: "Ongoing", ProducerID: 1, TimeoutMillis: 60_000, StartMillis: now.Add(-90 * time.Second).UnixMilli(), Coordinator: 2},
		{TransactionalID: "stuck", State: "PrepareCommit", ProducerID: 7, ProducerEpoch: 3, TimeoutMillis: 60_000, StartMillis: now.Add(-5 * time.Minute).UnixMilli(), Coordinator: 2},
		{TransactionalID: "none", State: "Ongoing", StartMillis: -1},
	}
	h := assessHealth(f, 0)
	if h.Healthy || len(h.Problems) != 1 {
		t.Fatalf("problems: %+v", h.Problems)
	}
	p := h.Problems[0]
	want := "hung transaction stuck: PrepareCommit for 5m0s (timeout 1m0s), producer 7 epoch 3, coordinator 2"
	if p.Kind != ProblemHungTransaction || p.TransactionalID != "stuck" || p.Broker != 2 || p.Detail != want {
		t.Errorf("got %+v\nwant detail %q", p, want)
	}
	f.transactions, f.txnErr = nil, "no answer within the timeout"
	if h := assessHealth(f, 0); len(h.Problems) != 1 || h.Problems[0].Kind != ProblemUnknownTxns {
		t.Errorf("transactions not read: %+v", h.Problems)
	}
}
