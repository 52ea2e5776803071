package admin

import (
	"context"
	"slices"
	"strings"

	"github.com/mqproject/mq/lib/client"
)

// ResourceGroup is the group config resource (Kafka's GROUP, type 32) of
// queue config and config get|set group: a share group's settings.
const ResourceGroup = "group"

// Sources of a group config in queue config.
const (
	sourceGroupConfig = "GROUP_CONFIG"   // the group's own value
	sourceDefault     = "DEFAULT_CONFIG" // the broker's default
)

// QueueConfigs describes the configs of share group group: all of them,
// or those named (an unknown one is a failure). The group need not exist:
// configs set before its first member apply from its start.
func (a *Admin) QueueConfigs(ctx context.Context, group string, names []string, showDocs bool) (*ConfigDescription, error) {
	return a.groupConfigs(ctx, "queue config", group, names, showDocs)
}

func (a *Admin) groupConfigs(ctx context.Context, what, group string, names []string, showDocs bool) (*ConfigDescription, error) {
	cs, err := client.GroupConfigs(ctx, a.cl, group)
	if err != nil {
		return nil, requestError(what, err)
	}
	d := ConfigDescription{Resource: ResourceGroup, Name: group, Configs: []ConfigEntry{}, showDocs: showDocs}
	for _, c := range cs {
		if len(names) > 0 && !slices.Contains(names, c.Name) {
			continue
		}
		e := ConfigEntry{Name: c.Name, Value: &c.Value, Source: sourceDefault, Doc: c.Doc}
		if c.Set {
			e.Source = sourceGroupConfig
		}
		d.Configs = append(d.Configs, e)
	}
	slices.SortFunc(d.Configs, func(x, y ConfigEntry) int { return strings.Compare(x.Name, y.Name) })
	for _, n := range names {
		if !slices.ContainsFunc(d.Configs, func(e ConfigEntry) bool { return e.Name == n }) {
			return nil, client.Failf("%s: share group %q has no config %q", what, group, n)
		}
	}
	return &d, nil
}

// SetQueueConfigs changes the configs of share group group
// incrementally: those in set get their values, those in deleted go back
// to the broker's defaults.
func (a *Admin) SetQueueConfigs(ctx context.Context, group string, set map[string]string, deleted []string) (*ConfigChange, error) {
	return a.setGroupConfigs(ctx, "queue config", group, set, deleted)
}

func (a *Admin) setGroupConfigs(ctx context.Context, what, group string, set map[string]string, deleted []string) (*ConfigChange, error) {
	if err := CheckConfigChange(what, set, deleted); err != nil {
		return nil, err
	}
	c := ConfigChange{Resource: ResourceGroup, Name: group, Set: set, Deleted: slices.Sorted(slices.Values(deleted))}
	if c.Set == nil {
		c.Set = map[string]string{}
	}
	if c.Deleted == nil {
		c.Deleted = []string{}
	}
	if err := client.AlterGroupConfigs(ctx, a.cl, group, set, deleted); err != nil {
		return nil, requestError(what, err)
	}
	return &c, nil
}

// QueueCreated is the result of queue create.
type QueueCreated struct {
	Group string `json:"group"`
	// New: the group had no member and no state; Start is where it
	// starts (its share.auto.offset.reset).
	New   bool              `json:"new"`
	Start string            `json:"start"`
	Set   map[string]string `json:"set"` // the configs set besides the start
}

// Table implements Result.
func (q *QueueCreated) Table() ([]string, [][]string) {
	state := "existing"
	if q.New {
		state = "new"
	}
	return []string{"GROUP", "STATE", "START"}, [][]string{{q.Group, state, orDash(q.Start)}}
}

// CreateQueue prepares share group group before its first member: a new
// group without a share.auto.offset.reset of its own gets start (earliest
// or latest), and the configs in set are set. A group already used keeps
// where it is; its configs in set are still set.
func (a *Admin) CreateQueue(ctx context.Context, group, start string, set map[string]string) (*QueueCreated, error) {
	const what = "queue create"
	st, err := client.StartShareGroup(ctx, a.cl, group, start)
	if err != nil {
		return nil, requestError(what, err)
	}
	q := &QueueCreated{Group: group, New: st.New, Start: st.Reset, Set: set}
	if q.Set == nil {
		q.Set = map[string]string{}
	}
	if len(set) > 0 {
		if err := client.AlterGroupConfigs(ctx, a.cl, group, set, nil); err != nil {
			return nil, requestError(what, err)
		}
	}
	if !st.New {
		cs, err := client.GroupConfigs(ctx, a.cl, group, client.ShareAutoOffsetReset)
		if err != nil {
			return nil, requestError(what, err)
		}
		for _, c := range cs {
			q.Start = c.Value
		}
	}
	return q, nil
}
