// Package kafkaext holds what mq adds to the Kafka protocol for its own
// tools: fields on Kafka's messages, carried as tagged fields (KIP-482), and
// requests of mq's own. Other Kafka clients never see either: a client
// skips tags it does not know, and mq's requests have API keys no Kafka
// release uses, which other clients ignore in ApiVersions.
//
// # Fields
//
// Each field has a tag number, a Go type and a JSON encoding of that type
// as the tag's value. JSON keeps the fields easy to extend: a field is only
// ever added, never renamed or removed, and a reader ignores what it does
// not know, so mqctl and mqd of different releases keep understanding each
// other. The numbers start at 10000, far above the tags Kafka assigns (from
// 0 per structure), so a future Kafka field never collides with ours.
//
// The broker sets a field with Set on a message's UnknownTags; a tool reads
// it with Get:
//
//	kafkaext.Set(&dir.UnknownTags, kafkaext.LogDir, health)          // mqd
//	var health kafkaext.DirHealth
//	ok, err := kafkaext.Get(&dir.UnknownTags, kafkaext.LogDir, &health) // mqctl
//
// The fields, by tag:
//
//	10000 LogDir           DescribeLogDirsResponseDir (v2+)             DirHealth
//	10001 LogDirPartition  DescribeLogDirsResponseTopicPartition (v2+)  PartitionHealth
//	10002 ApiVersions      ApiVersionsResponse (v3+)                    Software
//	10003 DescribeClusterBroker DescribeClusterResponseBroker (v0+)     ClusterBroker
//	10004 SharePartition   DescribeShareGroupOffsetsResponseGroupTopicPartition  SharePartitionState
//	10005 ShareForward     AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest  ShareForwarded
//
// The fields exist only in the flexible versions of a message (where Kafka
// has tagged fields at all); a request at an older version gets none.
//
// # Requests
//
// mq's requests implement kmsg.Request and kmsg.Response, so kgo sends them
// like any other (Client.Request, Broker.Request) once the broker
// advertises their key. Their API keys start at 16384; each is flexible
// from version 0 (request header v2, response header v1), and its body is
// a JSON document. A Kafka broker does not advertise these keys, so kgo
// refuses to send them there (kerr.UnsupportedVersion-like errors), and a
// broker that got one anyway would close the connection: nothing is done
// by mistake.
//
// The requests, by key:
//
//	16384 SkipDamaged  an operator gives damaged ranges up (mqctl records skip-damaged)
//	16385 Refetch      a follower asks its leader for leave to cut its log before a damaged range
//
// # Dead-letter headers
//
// The names of the headers a dead letter carries (DLQTopic, DLQError,
// ...) are here too: mqpipe exec and the broker's share-group
// dead-lettering (lib/broker's share_dlq.go) both write them.
package kafkaext
