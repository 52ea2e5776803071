package coordinator

import (
	"context"

	"github.com/mqproject/mq/lib/controller"
)

// Keyed is a coordinator whose keys are spread over a Topic's partitions
// (lib/group's groups, lib/txn's transactional ids), as Locate needs it.
type Keyed struct {
	What      string                          // what a key names, in errors: "group", "transactional id"
	Partition func(key string, n int32) int32 // the key's partition, of n
	Check     func(key string) error          // nil: key is served here now
	WaitLoad  func(key string, done <-chan struct{})
	Sync      func()           // loads the partitions this node leads (SyncOwnership)
	Loading   func(error) bool // whether Check's error says the load is under way
}

// LocateError is a coordinator Locate could not name: Loading while this
// node, which coordinates the key, still loads its partition; otherwise
// the coordinator is not available. Its text is for the client.
type LocateError struct {
	Loading bool
	Msg     string
}

func (e *LocateError) Error() string { return e.Msg }

// Locate returns the broker that coordinates key: the leader of key's
// partition of the topic, which is created on first use (an error of
// Ensure is returned as it is; every other failure is a *LocateError). A
// leader the hosted partitions found gone (partition.Manager.Gone) is
// waited for, within ctx, until the controller elected another. When this
// node leads the partition, Locate loads it unless Check already serves
// key, and waits for the load within ctx.
func (t *Topic) Locate(ctx context.Context, key string, k Keyed) (controller.Broker, error) {
	ct, err := t.Ensure(ctx)
	if err != nil {
		return controller.Broker{}, err
	}
	p := k.Partition(key, int32(len(ct.Partitions)))
	hosted := t.cfg.Hosted
	img := t.cfg.Controller.Image()
	if hosted.Gone(ct.Partitions[p].Leader) {
		// Not a coordinator the client would find gone: the controller
		// is electing another leader of the key's partition.
		img = hosted.Await(ctx, func(img *controller.Image) bool {
			ct := img.Topics[ct.Name]
			return ct != nil && hosted.Gone(ct.Partitions[p].Leader)
		})
		if ct = img.Topics[ct.Name]; ct == nil {
			return controller.Broker{}, &LocateError{Msg: "the " + k.What + "'s partition is gone"}
		}
	}
	leader := ct.Partitions[p].Leader
	br, ok := img.Brokers[leader]
	if leader < 0 || !ok {
		return controller.Broker{}, &LocateError{Msg: "the " + k.What + "'s partition has no leader"}
	}
	if leader == t.cfg.NodeID {
		if k.Check(key) != nil {
			k.Sync()
		}
		k.WaitLoad(key, ctx.Done())
		switch err := k.Check(key); {
		case k.Loading(err):
			return controller.Broker{}, &LocateError{Loading: true, Msg: "loading the " + k.What + "'s partition"}
		case err != nil:
			return controller.Broker{}, &LocateError{Msg: err.Error()}
		}
	}
	return br, nil
}
