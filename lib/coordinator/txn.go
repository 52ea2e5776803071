package coordinator

import (
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/txn"
)

// TxnStore is the Topic as lib/txn's Store: __transaction_state's
// records (transaction markers are none of its), and the leader epoch of
// a partition led here, the coordinator epoch of its markers.
func (t *Topic) TxnStore() txn.Store { return txnStore{t} }

type txnStore struct{ t *Topic }

func (s txnStore) Append(p int32, batch []byte) (txn.Pending, error) {
	w, err := s.t.append(p, batch)
	if w == nil {
		return nil, err
	}
	return w, err
}

func (s txnStore) Replay(p int32, fn func(key, value []byte) error) error {
	return s.t.Replay(p, func(e group.Entry) error {
		if e.Control {
			return nil
		}
		return fn(e.Key, e.Value)
	})
}

func (s txnStore) LeaderEpoch(p int32) int32 {
	h, err := s.t.leader(p)
	if err != nil {
		return -1
	}
	return h.LeaderEpoch()
}
