package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// Config resource types, as mqctl names them.
const (
	ResourceTopic  = "topic"
	ResourceBroker = "broker"
)

// ClusterDefault names the cluster-wide broker defaults in
// "config get|set broker default": dynamic configs every broker inherits.
const ClusterDefault = "default"

// ConfigTarget is the resource whose configs config get and set read or
// change.
type ConfigTarget struct {
	Resource string // ResourceTopic, ResourceBroker or ResourceGroup
	// Name is the topic; for a broker its id, ClusterDefault, or ""
	// (get: the only broker of the cluster; set: ClusterDefault).
	Name string
}

// ParseConfigTarget reads the leading arguments of config get and set,
// "topic NAME", "broker [ID|default]" or "group NAME", and returns the arguments after
// them (config names, or key=value pairs).
func ParseConfigTarget(what string, args []string) (ConfigTarget, []string, error) {
	if len(args) == 0 {
		return ConfigTarget{}, nil, client.Usagef("%s: missing topic NAME, broker [ID] or group NAME", what)
	}
	switch args[0] {
	case ResourceTopic, "topics":
		if len(args) < 2 || args[1] == "" {
			return ConfigTarget{}, nil, client.Usagef("%s: missing topic name", what)
		}
		return ConfigTarget{Resource: ResourceTopic, Name: args[1]}, args[2:], nil
	case ResourceGroup, "groups":
		if len(args) < 2 || args[1] == "" {
			return ConfigTarget{}, nil, client.Usagef("%s: missing group name", what)
		}
		return ConfigTarget{Resource: ResourceGroup, Name: args[1]}, args[2:], nil
	case ResourceBroker, "brokers":
		t := ConfigTarget{Resource: ResourceBroker}
		rest := args[1:]
		if len(rest) > 0 {
			if rest[0] == ClusterDefault {
				t.Name, rest = ClusterDefault, rest[1:]
			} else if id, err := strconv.ParseInt(rest[0], 10, 32); err == nil {
				if id < 0 {
					return ConfigTarget{}, nil, client.Usagef("%s: bad broker id %s", what, rest[0])
				}
				t.Name, rest = rest[0], rest[1:]
			}
		}
		return t, rest, nil
	}
	return ConfigTarget{}, nil, client.Usagef("%s: unknown resource %q (want topic, broker or group)", what, args[0])
}

// String names the target in messages: topic "orders", broker 1, the
// cluster-wide broker defaults.
func (t ConfigTarget) String() string {
	switch {
	case t.Resource == ResourceTopic:
		return fmt.Sprintf("topic %q", t.Name)
	case t.Resource == ResourceGroup:
		return fmt.Sprintf("group %q", t.Name)
	case t.Name == ClusterDefault:
		return "cluster-wide broker defaults"
	case t.Name == "":
		return "broker"
	}
	return "broker " + t.Name
}

// ConfigEntry is one config in config get.
type ConfigEntry struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"` // null: sensitive, or no value
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
	// Doc is what the config means, as the broker documents it
	// (DescribeConfigs v3+); "" when it does not.
	Doc string `json:"doc"`
}

// ConfigDescription is the result of config get.
type ConfigDescription struct {
	Resource string        `json:"resource"` // topic or broker
	Name     string        `json:"name"`     // topic name, broker id, or "default"
	Configs  []ConfigEntry `json:"configs"`  // sorted by name

	showDocs bool // the table has a DOC column
}

// Table implements Result: NAME VALUE SOURCE, and DOC when asked for.
func (d ConfigDescription) Table() ([]string, [][]string) {
	rows := make([][]string, len(d.Configs))
	for i, c := range d.Configs {
		v := "-"
		switch {
		case c.Sensitive:
			v = "(sensitive)"
		case c.Value != nil:
			v = *c.Value
		}
		rows[i] = []string{c.Name, v, c.Source}
		if d.showDocs {
			rows[i] = append(rows[i], orDash(c.Doc))
		}
	}
	if d.showDocs {
		return []string{"NAME", "VALUE", "SOURCE", "DOC"}, rows
	}
	return []string{"NAME", "VALUE", "SOURCE"}, rows
}

// brokerID resolves the broker a config command addresses: the id given,
// or the only broker of the cluster. ok is false for the cluster defaults.
func (a *Admin) brokerID(ctx context.Context, what string, t ConfigTarget) (id int32, ok bool, err error) {
	switch t.Name {
	case ClusterDefault:
		return 0, false, nil
	case "":
		md, err := a.adm.BrokerMetadata(ctx)
		if err != nil {
			return 0, false, requestError(what, err)
		}
		if len(md.Brokers) != 1 {
			return 0, false, client.Usagef("%s: the cluster has %d brokers; name one by id, or say default", what, len(md.Brokers))
		}
		return md.Brokers[0].NodeID, true, nil
	}
	n, err := strconv.ParseInt(t.Name, 10, 32)
	if err != nil {
		return 0, false, client.Usagef("%s: bad broker id %q", what, t.Name)
	}
	md, err := a.adm.BrokerMetadata(ctx)
	if err != nil {
		return 0, false, requestError(what, err)
	}
	var ids []string
	for _, b := range md.Brokers {
		if b.NodeID == int32(n) {
			return int32(n), true, nil
		}
		ids = append(ids, itoa(b.NodeID))
	}
	return 0, false, client.Failf("%s: unknown broker %d (the cluster has %s)", what, n, strings.Join(ids, ", "))
}

// GetConfigs describes the configs of t: all of them, or the named ones,
// each with the broker's documentation of it; with showDocs the table
// shows it too (JSON always has it). For a broker without an id it
// describes the only broker of the cluster. An unknown name among names
// is a failure.
func (a *Admin) GetConfigs(ctx context.Context, t ConfigTarget, names []string, showDocs bool) (*ConfigDescription, error) {
	const what = "config get"
	if t.Resource == ResourceGroup {
		d, err := a.groupConfigs(ctx, what, t.Name, names, showDocs)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	d := ConfigDescription{Resource: t.Resource, Name: t.Name, Configs: []ConfigEntry{}, showDocs: showDocs}
	typ, resource := kmsg.ConfigResourceTypeTopic, t.Name
	if t.Resource == ResourceBroker {
		id, one, err := a.brokerID(ctx, what, t)
		if err != nil {
			return nil, err
		}
		// The cluster-wide defaults are the broker resource named "".
		typ, resource, d.Name = kmsg.ConfigResourceTypeBroker, "", ClusterDefault
		if one {
			resource, d.Name = itoa(id), itoa(id)
		}
	}
	rc, err := a.describeConfigs(ctx, typ, resource)
	if err != nil {
		return nil, requestError(what, err)
	}
	if err := kerr.ErrorForCode(rc.ErrorCode); err != nil {
		msg := ""
		if rc.ErrorMessage != nil {
			msg = *rc.ErrorMessage
		}
		return nil, client.Failf("%s: %s: %s", what, t, errText(err, msg))
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]bool{}
	for _, c := range rc.Configs {
		if len(want) > 0 && !want[c.Name] {
			continue
		}
		found[c.Name] = true
		e := ConfigEntry{Name: c.Name, Value: c.Value, Source: c.Source.String(), Sensitive: c.IsSensitive}
		if c.Documentation != nil {
			e.Doc = *c.Documentation
		}
		d.Configs = append(d.Configs, e)
	}
	slices.SortFunc(d.Configs, func(x, y ConfigEntry) int { return strings.Compare(x.Name, y.Name) })
	var missing []string
	for _, n := range names {
		if !found[n] && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		err := client.Failf("%s: %s has no config %q", what, t, missing[0])
		if len(d.Configs) == 0 {
			return nil, err
		}
		return &d, err
	}
	return &d, nil
}

// describeConfigs describes one config resource with the documentation
// of each config (IncludeDocumentation, DescribeConfigs v3+), which kadm
// does not ask for. kgo sends a broker resource to the broker it names.
func (a *Admin) describeConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string) (kmsg.DescribeConfigsResponseResource, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return kmsg.DescribeConfigsResponseResource{}, err
	}
	if len(resp.Resources) != 1 {
		return kmsg.DescribeConfigsResponseResource{}, fmt.Errorf("%d answers for one resource", len(resp.Resources))
	}
	return resp.Resources[0], nil
}

// ConfigChange is the result of config set.
type ConfigChange struct {
	Resource string            `json:"resource"`
	Name     string            `json:"name"`    // topic name, broker id, or "default"
	Set      map[string]string `json:"set"`     // configs set, by name
	Deleted  []string          `json:"deleted"` // configs deleted (back to their defaults), sorted
}

// Table implements Result: one row per config changed.
func (c ConfigChange) Table() ([]string, [][]string) {
	var rows [][]string
	for _, k := range sortedKeys(c.Set) {
		rows = append(rows, []string{k, "set", c.Set[k]})
	}
	for _, k := range c.Deleted {
		rows = append(rows, []string{k, "deleted", "-"})
	}
	return []string{"NAME", "ACTION", "VALUE"}, rows
}

// SetConfigs changes configs of t incrementally: the configs in set get
// their values, those in deleted go back to their defaults, the others
// keep theirs. For a broker without an id it changes the cluster-wide
// defaults.
func (a *Admin) SetConfigs(ctx context.Context, t ConfigTarget, set map[string]string, deleted []string) (*ConfigChange, error) {
	const what = "config set"
	if t.Resource == ResourceGroup {
		return a.setGroupConfigs(ctx, what, t.Name, set, deleted)
	}
	c := ConfigChange{Resource: t.Resource, Name: t.Name, Set: set, Deleted: slices.Sorted(slices.Values(deleted))}
	if c.Set == nil {
		c.Set = map[string]string{}
	}
	if c.Deleted == nil {
		c.Deleted = []string{}
	}
	if err := CheckConfigChange(what, set, deleted); err != nil {
		return nil, err
	}
	ops := alterOps(set, deleted)
	var resps kadm.AlterConfigsResponses
	var err error
	if t.Resource == ResourceTopic {
		resps, err = a.adm.AlterTopicConfigs(ctx, ops, t.Name)
	} else {
		if t.Name == "" {
			t.Name = ClusterDefault
		}
		c.Name = t.Name
		id, one, err2 := a.brokerID(ctx, what, t)
		if err2 != nil {
			return nil, err2
		}
		if one {
			resps, err = a.adm.AlterBrokerConfigs(ctx, ops, id)
		} else {
			resps, err = a.adm.AlterBrokerConfigs(ctx, ops)
		}
	}
	if err != nil {
		return nil, requestError(what, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return nil, client.Failf("%s: %s: %s", what, t, errText(r.Err, r.ErrMessage))
		}
	}
	if len(resps) == 0 {
		return nil, client.Failf("%s: %s: no answer", what, t)
	}
	return &c, nil
}

// CheckConfigChange refuses a config change that changes nothing or both
// sets and deletes a config (a usage error).
func CheckConfigChange(what string, set map[string]string, deleted []string) error {
	if len(set) == 0 && len(deleted) == 0 {
		return client.Usagef("%s: nothing to change (give key=value or --delete KEY)", what)
	}
	for _, k := range deleted {
		if _, both := set[k]; both {
			return client.Usagef("%s: config %s both set and deleted", what, k)
		}
	}
	return nil
}
