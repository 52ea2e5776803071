package admin

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// brokerWait bounds how long cluster describe waits for one broker's
// answer: a broker that is stopped or cut off accepts the connection and
// never answers.
const brokerWait = 5 * time.Second

// unanswered reports whether err means a broker gave no answer: it could
// not be reached, or did not answer in time.
func unanswered(err error) bool {
	return client.IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded)
}

// APIVersion is one Kafka API a broker answers and its version range.
type APIVersion struct {
	Key  int16  `json:"key"`
	Name string `json:"name"`
	Min  int16  `json:"min"`
	Max  int16  `json:"max"`
}

// BrokerDescription is one broker in cluster describe.
type BrokerDescription struct {
	ID         int32   `json:"id"`
	Host       string  `json:"host"`
	Port       int32   `json:"port"`
	Rack       *string `json:"rack"` // null: none
	Controller bool    `json:"controller"`
	// State is "alive", "fenced" (the controller stopped hearing from it:
	// it leads nothing), "shutting down" (controlled shutdown: its
	// leaderships are moving away) or "unreachable" (the controller still
	// counts it alive, but it does not answer us: killed, stopped or cut
	// off, and not yet fenced; Error says why).
	State string `json:"state"`
	// PartitionsLed counts the partitions it leads, internal topics too.
	PartitionsLed int `json:"partitions_led"`
	// Version is what the broker runs: "mq " and the release when it says
	// so (mqd does, in its ApiVersions responses), else the Apache Kafka
	// release whose protocol its API versions match best (franz-go's
	// guess, e.g. "v3.7"), or "unknown".
	Version string `json:"version"`
	// Software is the broker's own name and release, nil when it does
	// not name them (Kafka, an older mqd).
	Software *kafkaext.Software `json:"software"`
	// KafkaProtocol is the newest Apache Kafka release whose version of
	// every API the broker answers it reaches (protocolLevel), e.g.
	// "3.8"; "" when unknown.
	KafkaProtocol string       `json:"kafka_protocol"`
	APIs          []APIVersion `json:"apis"`
	Error         string       `json:"error,omitempty"` // the API versions could not be read
	// LogDirs are the broker's log directories (empty when it does not
	// answer DescribeLogDirs; LogDirsError says why).
	LogDirs      []LogDirDescription `json:"log_dirs"`
	LogDirsError string              `json:"log_dirs_error,omitempty"`
}

// ClusterDescription is the result of cluster describe.
type ClusterDescription struct {
	ClusterID  string              `json:"cluster_id"`
	Controller int32               `json:"controller"` // -1: none known
	Brokers    []BrokerDescription `json:"brokers"`
	// Quorum is the controller quorum; null when the brokers do not
	// describe it (QuorumError says why: "unavailable" for a broker that
	// does not answer DescribeQuorum).
	Quorum      *QuorumDescription `json:"quorum"`
	QuorumError string             `json:"quorum_error,omitempty"`

	// noQuorum: asked about the quorum, the broker said there is no
	// active controller (NOT_CONTROLLER), or did not answer in time.
	noQuorum bool
	showAPIs bool      // the table lists every broker's APIs too
	now      time.Time // what the table's times are relative to
}

// Table implements Result: the brokers.
func (d ClusterDescription) Table() ([]string, [][]string) {
	rows := make([][]string, len(d.Brokers))
	for i, b := range d.Brokers {
		rack := "-"
		if b.Rack != nil {
			rack = *b.Rack
		}
		ctrl := "no"
		if b.Controller {
			ctrl = "yes"
		}
		protocol := "unknown"
		if b.KafkaProtocol != "" {
			protocol = "Kafka " + b.KafkaProtocol
		}
		rows[i] = []string{itoa(b.ID), b.Host, itoa(b.Port), rack, orDash(b.State), itoa(b.PartitionsLed), ctrl, b.Version, protocol}
	}
	return []string{"BROKER", "HOST", "PORT", "RACK", "STATE", "LEADS", "CONTROLLER", "VERSION", "PROTOCOL"}, rows
}

// WriteTable writes the cluster id and controller, the broker table and,
// when asked for, the API versions of each broker.
func (d ClusterDescription) WriteTable(w io.Writer) error {
	ctrl := "none"
	if d.Controller >= 0 {
		ctrl = itoa(d.Controller)
	}
	if err := client.WriteTable(w, nil, [][]string{{"CLUSTER-ID", orDash(d.ClusterID)}, {"CONTROLLER", ctrl}}); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	header, rows := d.Table()
	if err := client.WriteTable(w, header, rows); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	if err := d.quorumTable(w); err != nil {
		return err
	}
	if header, rows := d.logDirTable(); len(rows) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := client.WriteTable(w, header, rows); err != nil {
			return err
		}
	}
	if !d.showAPIs {
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	var api [][]string
	for _, b := range d.Brokers {
		for _, v := range b.APIs {
			api = append(api, []string{itoa(b.ID), itoa(v.Key), v.Name, itoa(v.Min), itoa(v.Max)})
		}
	}
	return client.WriteTable(w, []string{"BROKER", "KEY", "API", "MIN", "MAX"}, api)
}

// logDirTable is one row per log directory of each broker: its path, the
// usable and total bytes of its volume, and whether writes to it fail.
func (d ClusterDescription) logDirTable() ([]string, [][]string) {
	var rows [][]string
	for _, b := range d.Brokers {
		if b.LogDirsError != "" {
			rows = append(rows, []string{itoa(b.ID), "?", "-", "-", b.LogDirsError})
		}
		for _, dir := range b.LogDirs {
			rows = append(rows, []string{itoa(b.ID), dir.Path, sizeText(dir.UsableBytes), sizeText(dir.TotalBytes), dirState(dir)})
		}
	}
	return []string{"BROKER", "LOG-DIR", "USABLE", "TOTAL", "STATE"}, rows
}

// DescribeCluster describes the cluster: its id, the controller, each
// broker with its address, rack, state, the partitions it leads and the
// Kafka APIs it answers, the controller quorum, and each broker's log
// directories with their free space and storage state. With showAPIs the
// table form lists the APIs too (JSON always has them).
func (a *Admin) DescribeCluster(ctx context.Context, showAPIs bool) (*ClusterDescription, error) {
	d, _, err := a.describeCluster(ctx, showAPIs)
	return d, err
}

// describeCluster is DescribeCluster, and the Metadata it was built from.
func (a *Admin) describeCluster(ctx context.Context, showAPIs bool) (*ClusterDescription, kadm.Metadata, error) {
	md, err := a.adm.Metadata(ctx)
	if err != nil {
		return nil, md, requestError("cluster describe", err)
	}
	r := a.roster(ctx, md)
	// Each broker is asked for its API versions directly, which is also
	// how a broker the controller still counts alive (a kill -9 goes
	// unnoticed for a session timeout) is found unreachable at once.
	vctx, vwait, cancel := boundedWait(ctx, brokerWait)
	versions, err := a.adm.ApiVersions(vctx)
	cancel()
	if err != nil {
		return nil, md, requestError("cluster describe: api versions", err)
	}
	dialed := r.dialOthers(ctx, versions)
	dirs := a.describeLogDirs(ctx, md.Brokers.NodeIDs(), nil)
	d := ClusterDescription{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []BrokerDescription{}, showAPIs: showAPIs, now: a.now()}
	// The quorum is asked of a broker that answered, which asks its
	// controller: the controller Metadata names may be the node that is
	// down, and franz-go would retry it until its own timeout.
	via, describes := int32(-1), false
	for _, id := range md.Brokers.NodeIDs() {
		if v, ok := versions[id]; ok && v.Err == nil {
			via = id
			describes = slices.ContainsFunc(v.Raw().ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == kmsg.DescribeQuorum.Int16() })
			break
		}
	}
	switch {
	case via < 0:
		d.QuorumError = "not asked: no broker answered"
	case !describes:
		d.QuorumError = quorumUnavailable
	default:
		d.Quorum, d.QuorumError, d.noQuorum = a.describeQuorum(ctx, via)
	}
	for _, b := range r.brokers {
		bd := r.describe(b, md.Controller)
		if ds := dirs.dirs[b.NodeID]; ds != nil {
			bd.LogDirs = ds
		}
		bd.LogDirsError = dirs.errs[b.NodeID]
		if bd.State == BrokerFenced && bd.LogDirsError == "" {
			bd.LogDirsError = "not asked: the broker is fenced"
		}
		if err := dialed[b.NodeID]; err != nil {
			bd.Error = brokerErrText(err, vwait)
			bd.State = BrokerUnreachable
		}
		if v, ok := versions[b.NodeID]; ok {
			if v.Err != nil {
				bd.Error = brokerErrText(v.Err, vwait)
				if unanswered(v.Err) && bd.State != BrokerFenced {
					bd.State = BrokerUnreachable
				}
			} else {
				bd.Version = v.VersionGuess()
				var sw kafkaext.Software
				if ok, err := kafkaext.Get(&v.Raw().UnknownTags, kafkaext.ApiVersions, &sw); ok && err == nil {
					bd.Software = &sw
					bd.Version = sw.Name + " " + sw.Version
				}
				bd.KafkaProtocol = protocolLevel(kversion.FromApiVersionsResponse(v.Raw()))
				v.EachKeySorted(func(key, lo, hi int16) {
					bd.APIs = append(bd.APIs, APIVersion{Key: key, Name: kafkaext.NameForKey(key), Min: lo, Max: hi})
				})
			}
		}
		d.Brokers = append(d.Brokers, bd)
	}
	slices.SortFunc(d.Brokers, func(x, y BrokerDescription) int { return int(x.ID) - int(y.ID) })
	return &d, md, nil
}

// brokerRoster is what Metadata and DescribeCluster (v2) say of the
// brokers: Metadata lists the brokers clients may use, DescribeCluster
// the fenced ones too, and the state of each.
type brokerRoster struct {
	brokers []kadm.BrokerDetail // every broker, fenced ones too
	states  map[int32]string    // by DescribeCluster; none: BrokerAlive
	led     map[int32]int       // partitions led, by broker
}

// roster reads the brokers of md and asks DescribeCluster, within
// brokerWait, for the fenced ones; without its answer every broker of md
// counts alive.
func (a *Admin) roster(ctx context.Context, md kadm.Metadata) brokerRoster {
	r := brokerRoster{brokers: slices.Clone(md.Brokers), states: map[int32]string{}, led: map[int32]int{}}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				r.led[p.Leader]++
			}
		}
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeFencedBrokers = true
	dctx, _, cancel := boundedWait(ctx, brokerWait)
	resp, err := dc.RequestWith(dctx, a.cl)
	cancel()
	if err != nil || resp.ErrorCode != 0 {
		return r
	}
	listed := map[int32]bool{}
	for _, b := range md.Brokers {
		listed[b.NodeID] = true
	}
	for _, b := range resp.Brokers {
		r.states[b.NodeID] = brokerState(b)
		if !listed[b.NodeID] {
			r.brokers = append(r.brokers, kadm.BrokerDetail{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		}
	}
	return r
}

// dialOthers dials, within brokerWait, each broker of the roster that
// counts alive but that versions (asked of Metadata's brokers) does not
// hold, and returns the dial errors by broker. Such a broker is one the
// brokers' images disagree on for a moment after a fence: left out of
// Metadata by one broker, listed unfenced by another. A dial tells
// whether it is down, which a broker that is gone is.
func (r brokerRoster) dialOthers(ctx context.Context, versions kadm.BrokersApiVersions) map[int32]error {
	errs := map[int32]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	dctx, _, cancel := boundedWait(ctx, brokerWait)
	defer cancel()
	for _, b := range r.brokers {
		if _, asked := versions[b.NodeID]; asked || r.states[b.NodeID] == BrokerFenced {
			continue
		}
		wg.Go(func() {
			var d net.Dialer
			conn, err := d.DialContext(dctx, "tcp", net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
			if err == nil {
				conn.Close()
				return
			}
			mu.Lock()
			errs[b.NodeID] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// describe is b as the roster knows it: no version, APIs or log
// directories yet.
func (r brokerRoster) describe(b kadm.BrokerDetail, controller int32) BrokerDescription {
	return BrokerDescription{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == controller,
		State: cmp.Or(r.states[b.NodeID], BrokerAlive), PartitionsLed: r.led[b.NodeID],
		Version: "unknown", APIs: []APIVersion{}, LogDirs: []LogDirDescription{}}
}

// kafkaReleases are the Apache Kafka releases protocolLevel measures a
// broker against, newest first.
var kafkaReleases = []struct {
	name     string
	versions func() *kversion.Versions
}{
	{"4.4", kversion.V4_4_0}, {"4.3", kversion.V4_3_0}, {"4.2", kversion.V4_2_0}, {"4.1", kversion.V4_1_0}, {"4.0", kversion.V4_0_0},
	{"3.9", kversion.V3_9_0}, {"3.8", kversion.V3_8_0}, {"3.7", kversion.V3_7_0}, {"3.6", kversion.V3_6_0}, {"3.5", kversion.V3_5_0},
	{"3.4", kversion.V3_4_0}, {"3.3", kversion.V3_3_0}, {"3.2", kversion.V3_2_0}, {"3.1", kversion.V3_1_0}, {"3.0", kversion.V3_0_0},
	{"2.8", kversion.V2_8_0}, {"2.7", kversion.V2_7_0}, {"2.6", kversion.V2_6_0}, {"2.5", kversion.V2_5_0}, {"2.4", kversion.V2_4_0},
	{"2.3", kversion.V2_3_0}, {"2.2", kversion.V2_2_0}, {"2.1", kversion.V2_1_0}, {"2.0", kversion.V2_0_0},
	{"1.1", kversion.V1_1_0}, {"1.0", kversion.V1_0_0},
	{"0.11", kversion.V0_11_0}, {"0.10.2", kversion.V0_10_2}, {"0.10.1", kversion.V0_10_1}, {"0.10.0", kversion.V0_10_0},
	{"0.9", kversion.V0_9_0}, {"0.8.2", kversion.V0_8_2}, {"0.8.1", kversion.V0_8_1}, {"0.8.0", kversion.V0_8_0},
}

// protocolLevel is the newest Kafka release whose version of each API
// the broker answers (and the release has) the broker reaches: a client
// written for that release finds every one of those APIs at the version
// it speaks, or newer. APIs the broker does not answer do not count, so
// the level says how current the broker's APIs are, not that it has all
// of Kafka's (mq has no transactions or ACLs). It is "" when the broker
// shares no API with any release or reaches none.
//
// Unlike franz-go's VersionGuess, which looks for a release whose table
// the broker matches exactly, this gives an answer for a broker that
// implements a subset of Kafka's APIs at mixed releases (mq): the
// release its oldest API version belongs to.
func protocolLevel(broker *kversion.Versions) string {
	for _, r := range kafkaReleases {
		release := r.versions()
		shared, reached := 0, true
		broker.EachMaxKeyVersion(func(key, max int16) {
			if want, ok := release.LookupMaxKeyVersion(key); ok {
				shared++
				reached = reached && max >= want
			}
		})
		if shared > 0 && reached {
			return r.name
		}
	}
	return ""
}
