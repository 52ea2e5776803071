package broker

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/server"
)

// denied is the answer to a request the ACLs refuse (authorize): the
// response of its API in which every resource the request names carries
// code, where the API has a code per resource, and the response's own
// error code otherwise.
func denied(req *server.Request, code int16) kmsg.Response {
	resp := req.Body.ResponseKind()
	resp.SetVersion(req.Version)
	switch r := req.Body.(type) {
	case *kmsg.ProduceRequest:
		out := resp.(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = p.Partition, code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.FetchRequest:
		out := resp.(*kmsg.FetchResponse)
		out.SessionID = r.SessionID
		for _, t := range r.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = p.Partition, code, -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.ListOffsetsRequest:
		out := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		out := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DeleteRecordsRequest:
		out := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = p.Partition, code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, code
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = &name, code
			out.Topics = append(out.Topics, st)
		}
		for _, t := range r.Topics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, code
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, code
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DescribeConfigsRequest:
		out := resp.(*kmsg.DescribeConfigsResponse)
		for _, rs := range r.Resources {
			s := kmsg.NewDescribeConfigsResponseResource()
			s.ResourceType, s.ResourceName, s.ErrorCode = rs.ResourceType, rs.ResourceName, code
			out.Resources = append(out.Resources, s)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, rs := range r.Resources {
			s := kmsg.NewAlterConfigsResponseResource()
			s.ResourceType, s.ResourceName, s.ErrorCode = rs.ResourceType, rs.ResourceName, code
			out.Resources = append(out.Resources, s)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rs := range r.Resources {
			s := kmsg.NewIncrementalAlterConfigsResponseResource()
			s.ResourceType, s.ResourceName, s.ErrorCode = rs.ResourceType, rs.ResourceName, code
			out.Resources = append(out.Resources, s)
		}
	case *kmsg.FindCoordinatorRequest:
		out := resp.(*kmsg.FindCoordinatorResponse)
		out.ErrorCode, out.NodeID = code, -1
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = k, -1, code
			out.Coordinators = append(out.Coordinators, c)
		}
	case *kmsg.OffsetCommitRequest:
		out := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.OffsetFetchRequest:
		out := resp.(*kmsg.OffsetFetchResponse)
		out.ErrorCode = code
		for _, g := range r.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = g.Group, code
			out.Groups = append(out.Groups, sg)
		}
	case *kmsg.DescribeGroupsRequest:
		out := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group, sg.ErrorCode = g, code
			out.Groups = append(out.Groups, sg)
		}
	case *kmsg.DeleteGroupsRequest:
		out := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group, sg.ErrorCode = g, code
			out.Groups = append(out.Groups, sg)
		}
	case *kmsg.ShareGroupDescribeRequest:
		out := resp.(*kmsg.ShareGroupDescribeResponse)
		for _, g := range r.GroupIDs {
			sg := kmsg.NewShareGroupDescribeResponseGroup()
			sg.GroupID, sg.ErrorCode = g, code
			out.Groups = append(out.Groups, sg)
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		out := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for _, g := range r.Groups {
			sg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			sg.GroupID, sg.ErrorCode = g.GroupID, code
			out.Groups = append(out.Groups, sg)
		}
	case *kmsg.AlterReplicaLogDirsRequest:
		out := resp.(*kmsg.AlterReplicaLogDirsResponse)
		for _, d := range r.Dirs {
			for _, t := range d.Topics {
				st := kmsg.NewAlterReplicaLogDirsResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					sp.Partition, sp.ErrorCode = p, code
					st.Partitions = append(st.Partitions, sp)
				}
				out.Topics = append(out.Topics, st)
			}
		}
	case *kmsg.CreateACLsRequest:
		out := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode = code
			out.Results = append(out.Results, res)
		}
	case *kmsg.DeleteACLsRequest:
		out := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = code
			out.Results = append(out.Results, res)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		out := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		users := map[string]bool{}
		for _, d := range r.Deletions {
			users[d.Name] = true
		}
		for _, u := range r.Upsertions {
			users[u.Name] = true
		}
		for u := range users {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, code
			out.Results = append(out.Results, res)
		}
	case *kafkaext.SkipDamagedRequest:
		out := resp.(*kafkaext.SkipDamagedResponse)
		for _, p := range r.Partitions {
			out.Partitions = append(out.Partitions, kafkaext.SkipDamagedPartitionResponse{Partition: p.Partition, ErrorCode: code, Skipped: []kafkaext.DamagedRange{}})
		}
	case *kafkaext.RefetchRequest:
		out := resp.(*kafkaext.RefetchResponse)
		for _, p := range r.Partitions {
			out.Partitions = append(out.Partitions, kafkaext.RefetchPartitionResponse{Topic: p.Topic, Partition: p.Partition, ErrorCode: code})
		}
	default:
		// The APIs answered by one code: the response's ErrorCode.
		if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() {
			f.SetInt(int64(code))
		}
	}
	return resp
}
