package coordinator

import (
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/txn"
)

// TransactionStateTopic is where lib/txn's coordinator keeps its
// records.
const TransactionStateTopic = "__transaction_state"

// NewTransactions starts lib/txn's coordinator on TransactionStateTopic,
// as NewGroups starts lib/group's: placed as cfg says (Name is set here,
// and Partitions is the count of an existing topic), configured as tc
// says (its Partitions and Store are set here), loading the partitions
// this node leads once it created the topic, and following their
// leadership. Close the coordinator, then the Topic.
func NewTransactions(cfg Config, tc txn.Config) (*txn.Coordinator, *Topic) {
	return start(cfg, TransactionStateTopic, func(partitions int32, t *Topic) *txn.Coordinator {
		tc.Partitions, tc.Store = partitions, t.TxnStore()
		return txn.New(tc)
	})
}

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
