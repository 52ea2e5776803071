// Package owned is which partitions of an internal topic a coordinator
// owns: the partitions this node leads and serves from memory, each
// loading (its replay running), loaded, or gone (unloaded, or its replay
// failed). lib/group (__consumer_offsets) and lib/txn
// (__transaction_state) keep their ownership in one Partitions each; it
// sits below both, beside lib/coordinator's runtime that drives them
// (FollowLeadership calls their LoadAsync and Unload).
//
// A partition is owned from Load or LoadAsync until Unload or Close.
// Its replay (Config.Replay) runs without the coordinator's mutex; what it
// read is installed under that mutex, and only if the partition is still
// owned by the same load: a partition unloaded during its replay installs
// nothing and its loaders get Config.NotOwned. A replay that fails gives
// the partition up (its loaders get the error; the next Load replays
// again). Until its replay is installed a partition's keys answer
// Config.Loading, the keys of partitions not owned Config.NotOwned.
//
// Each owned partition has a context, Gone, that ends when it is unloaded
// or the coordinator closes: the waits of writes appended under that
// ownership (Wait) and any work on its behalf give up with it.
//
// # Locks
//
// Partitions has no mutex of its own: it is guarded by the coordinator's
// (Config.Mu). Methods whose names end in Locked are called with it held;
// Load, LoadAsync, WaitLoaded and Owned take it. Replay is called without
// it, on Load's goroutine or on a goroutine of LoadAsync's; install is
// called with it.
package owned
