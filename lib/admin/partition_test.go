package admin

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
)

func TestParsePartitionSpecs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
		code int
	}{
		{[]string{"t"}, "[{t -1}]", 0},
		{[]string{"t:0", "t:12", "u"}, "[{t 0} {t 12} {u -1}]", 0},
		{[]string{"t", "t:1"}, "[{t -1} {t 1}]", 0},
		{[]string{"t:"}, "", client.ExitUsage},
		{[]string{":1"}, "", client.ExitUsage},
		{[]string{"t:-1"}, "", client.ExitUsage},
		{[]string{"t:x"}, "", client.ExitUsage},
		{[]string{"t:1", "t:1"}, "", client.ExitUsage},
		{[]string{""}, "", client.ExitUsage},
	} {
		got, err := ParsePartitionSpecs("test", tc.in)
		if client.ExitCode(err) != tc.code || tc.code == 0 && fmt.Sprint(got) != tc.want {
			t.Errorf("ParsePartitionSpecs(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestElectLeadersCheckAndResults(t *testing.T) {
	for _, tc := range []struct {
		req  ElectLeaders
		code int
	}{
		{ElectLeaders{All: true}, 0},
		{ElectLeaders{Partitions: []PartitionSpec{{"t", 0}}, Unclean: true}, 0},
		{ElectLeaders{}, client.ExitUsage},
		{ElectLeaders{All: true, Partitions: []PartitionSpec{{"t", -1}}}, client.ExitUsage},
	} {
		if got := client.ExitCode(tc.req.Check()); got != tc.code {
			t.Errorf("%+v: exit %d, want %d", tc.req, got, tc.code)
		}
	}
	for _, tc := range []struct {
		err        error
		wantResult string
	}{
		{nil, ResultElected},
		{kerr.ElectionNotNeeded, ResultUnchanged},
		{kerr.PreferredLeaderNotAvailable, ResultFailed},
		{kerr.EligibleLeadersNotAvailable, ResultFailed},
		{kerr.UnknownTopicOrPartition, ResultFailed},
	} {
		r := electionResult(kadm.ElectLeadersResult{Topic: "t", Partition: 3, Err: tc.err})
		if r.Result != tc.wantResult || (tc.wantResult == ResultFailed) != (r.Error != "") || r.Partition != 3 {
			t.Errorf("%v: %+v, want %s", tc.err, r, tc.wantResult)
		}
	}
	rs := ElectionResults{{Topic: "gone", Partition: -1, Result: ResultFailed, Error: "unknown topic"}, {Topic: "t", Partition: 0, Result: ResultUnchanged}}
	if _, rows := rs.Table(); rows[0][1] != "-" || rows[1][3] != "-" {
		t.Errorf("table rows %q", rows)
	}
	if rs.allFailed() || !(ElectionResults{rs[0]}).allFailed() {
		t.Error("allFailed")
	}
}
