package admin

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// TestProtocolLevelOfEachKafkaReleaseIsThatRelease: a broker that answers
// exactly a release's API versions is at that release's level.
func TestProtocolLevelOfEachKafkaReleaseIsThatRelease(t *testing.T) {
	for i, r := range kafkaReleases {
		want := r.name
		// Releases that changed no API version are indistinguishable;
		// the newest of them is the answer.
		for j := i - 1; j >= 0 && kafkaReleases[j].versions().Equal(r.versions()); j-- {
			want = kafkaReleases[j].name
		}
		if r.name == "0.8.0" {
			// 0.8.1 and 0.8.2 only added APIs to 0.8.0's (offset commit
			// and fetch, consumer metadata), which a broker answering
			// fewer APIs is not held to.
			want = "0.8.2"
		}
		if got := protocolLevel(r.versions()); got != want {
			t.Errorf("Kafka %s's own versions: level %q, want %q", r.name, got, want)
		}
	}
}

func TestProtocolLevelIsTheReleaseOfTheOldestAPIVersion(t *testing.T) {
	versions := func(keys ...kmsg.ApiVersionsResponseApiKey) *kversion.Versions {
		r := kmsg.NewPtrApiVersionsResponse()
		r.ApiKeys = keys
		return kversion.FromApiVersionsResponse(r)
	}
	key := func(k kmsg.Key, max int16) kmsg.ApiVersionsResponseApiKey {
		return kmsg.ApiVersionsResponseApiKey{ApiKey: k.Int16(), MaxVersion: max}
	}
	for _, c := range []struct {
		name   string
		broker *kversion.Versions
		want   string
	}{
		// Produce 11 and Fetch 18 are 3.9 and 4.1, ListOffsets 8 stops at
		// 3.8 (3.9 has 9): a subset of Kafka's APIs at mixed releases.
		{"mixed releases", versions(key(kmsg.Produce, 11), key(kmsg.Fetch, 18), key(kmsg.ListOffsets, 8)), "3.8"},
		// An API no release has (mq's own keys) does not count.
		{"own keys ignored", versions(key(kmsg.Produce, 11), kmsg.ApiVersionsResponseApiKey{ApiKey: 16384}), "3.9"},
		{"newer than every release", versions(key(kmsg.Produce, 99)), kafkaReleases[0].name},
		{"older than every release", versions(key(kmsg.Produce, -1)), ""},
		{"nothing shared", versions(kmsg.ApiVersionsResponseApiKey{ApiKey: 16384}), ""},
	} {
		if got := protocolLevel(c.broker); got != c.want {
			t.Errorf("%s: level %q, want %q", c.name, got, c.want)
		}
	}
}

func TestClusterTableShowsSoftwareAndProtocol(t *testing.T) {
	d := ClusterDescription{Brokers: []BrokerDescription{
		{ID: 1, Host: "h", Port: 9092, Version: "mq v0.4.0", Software: &kafkaext.Software{Name: "mq", Version: "v0.4.0"}, KafkaProtocol: "3.8"},
		{ID: 2, Host: "k", Port: 9092, Version: "v3.7", KafkaProtocol: "3.7"},
		{ID: 3, Host: "x", Port: 9092, Version: "unknown"},
	}}
	header, rows := d.Table()
	if want := []string{"BROKER", "HOST", "PORT", "RACK", "STATE", "LEADS", "CONTROLLER", "VERSION", "PROTOCOL"}; !slices.Equal(header, want) {
		t.Fatalf("header %q, want %q", header, want)
	}
	for i, want := range [][2]string{{"mq v0.4.0", "Kafka 3.8"}, {"v3.7", "Kafka 3.7"}, {"unknown", "unknown"}} {
		if got := [2]string{rows[i][7], rows[i][8]}; got != want {
			t.Errorf("broker %d: VERSION, PROTOCOL = %q, want %q", i+1, got, want)
		}
	}
}

// TestDialOthersFindsADownBrokerMetadataLeftOut: a broker the roster
// counts alive but Metadata left out (the brokers' images disagree for a
// moment after a fence) is dialled; one that is down comes back with the
// dial's error, one that listens with none. Brokers asked already, and
// fenced ones, are not dialled.
func TestDialOthersFindsADownBrokerMetadataLeftOut(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close() // nothing listens there any more
	detail := func(id int32, l net.Listener) kadm.BrokerDetail {
		a := l.Addr().(*net.TCPAddr)
		return kadm.BrokerDetail{NodeID: id, Host: a.IP.String(), Port: int32(a.Port)}
	}
	r := brokerRoster{
		brokers: []kadm.BrokerDetail{detail(1, gone), detail(2, gone), detail(3, gone), detail(4, up)},
		states:  map[int32]string{2: BrokerFenced},
	}
	asked := kadm.BrokersApiVersions{1: kadm.BrokerApiVersions{NodeID: 1}}
	errs := r.dialOthers(context.Background(), asked)
	if len(errs) != 1 || !client.IsUnreachable(errs[3]) {
		t.Errorf("dial errors %v, want broker 3's alone, unreachable", errs)
	}
}
