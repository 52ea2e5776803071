package admin

import (
	"context"
	"io"
	"slices"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

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
	// Version is the Apache Kafka release whose protocol the broker's API
	// versions match best (franz-go's guess, e.g. "v3.7"), or "unknown".
	Version string       `json:"version"`
	APIs    []APIVersion `json:"apis"`
	Error   string       `json:"error,omitempty"` // the API versions could not be read
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

	showAPIs bool // the table lists every broker's APIs too
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
		rows[i] = []string{itoa(b.ID), b.Host, itoa(b.Port), rack, ctrl, b.Version}
	}
	return []string{"BROKER", "HOST", "PORT", "RACK", "CONTROLLER", "VERSION"}, rows
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
// broker with its address, rack and the Kafka APIs it answers, and each
// broker's log directories with their free space and storage state. With
// showAPIs the table form lists the APIs too (JSON always has them).
func (a *Admin) DescribeCluster(ctx context.Context, showAPIs bool) (*ClusterDescription, error) {
	md, err := a.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, requestError("cluster describe", err)
	}
	versions, err := a.adm.ApiVersions(ctx)
	if err != nil {
		return nil, requestError("cluster describe: api versions", err)
	}
	dirs := a.describeLogDirs(ctx, nil)
	d := ClusterDescription{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []BrokerDescription{}, showAPIs: showAPIs}
	for _, b := range md.Brokers {
		bd := BrokerDescription{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == md.Controller,
			Version: "unknown", APIs: []APIVersion{}, LogDirs: dirs.dirs[b.NodeID], LogDirsError: dirs.errs[b.NodeID]}
		if bd.LogDirs == nil {
			bd.LogDirs = []LogDirDescription{}
		}
		if v, ok := versions[b.NodeID]; ok {
			if v.Err != nil {
				bd.Error = errText(v.Err, "")
			} else {
				bd.Version = v.VersionGuess()
				v.EachKeySorted(func(key, lo, hi int16) {
					bd.APIs = append(bd.APIs, APIVersion{Key: key, Name: kafkaext.NameForKey(key), Min: lo, Max: hi})
				})
			}
		}
		d.Brokers = append(d.Brokers, bd)
	}
	slices.SortFunc(d.Brokers, func(x, y BrokerDescription) int { return int(x.ID) - int(y.ID) })
	return &d, nil
}
