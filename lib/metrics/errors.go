package metrics

import "github.com/twmb/franz-go/pkg/kmsg"

// responseErrors calls fn with every error code of a response: its top
// level one and those of its topics, partitions and groups. It knows the
// responses of the APIs mq serves; others count no errors. It allocates
// nothing.
func responseErrors(msg kmsg.Response, fn func(int16)) {
	switch r := msg.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		fn(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for i := range r.Topics {
			fn(r.Topics[i].ErrorCode)
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		fn(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
		for i := range r.Groups {
			fn(r.Groups[i].ErrorCode)
			for j := range r.Groups[i].Topics {
				for k := range r.Groups[i].Topics[j].Partitions {
					fn(r.Groups[i].Topics[j].Partitions[k].ErrorCode)
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		fn(r.ErrorCode)
		for i := range r.Coordinators {
			fn(r.Coordinators[i].ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		fn(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		fn(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		fn(r.ErrorCode)
		for i := range r.Members {
			fn(r.Members[i].ErrorCode)
		}
	case *kmsg.SyncGroupResponse:
		fn(r.ErrorCode)
	case *kmsg.DescribeGroupsResponse:
		for i := range r.Groups {
			fn(r.Groups[i].ErrorCode)
		}
	case *kmsg.ListGroupsResponse:
		fn(r.ErrorCode)
	case *kmsg.DeleteGroupsResponse:
		for i := range r.Groups {
			fn(r.Groups[i].ErrorCode)
		}
	case *kmsg.OffsetDeleteResponse:
		fn(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			fn(r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			fn(r.Topics[i].ErrorCode)
		}
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			fn(r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteRecordsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.InitProducerIDResponse:
		fn(r.ErrorCode)
	case *kmsg.OffsetForLeaderEpochResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.DescribeConfigsResponse:
		for i := range r.Resources {
			fn(r.Resources[i].ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for i := range r.Resources {
			fn(r.Resources[i].ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for i := range r.Resources {
			fn(r.Resources[i].ErrorCode)
		}
	case *kmsg.ElectLeadersResponse:
		fn(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fn(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.DescribeClusterResponse:
		fn(r.ErrorCode)
	case *kmsg.DescribeLogDirsResponse:
		fn(r.ErrorCode)
		for i := range r.Dirs {
			fn(r.Dirs[i].ErrorCode)
		}
	}
}
