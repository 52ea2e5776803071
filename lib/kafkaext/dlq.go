package kafkaext

// Headers of a dead-lettered record. When a record could not be processed
// within its attempt limit, a copy goes to a dead-letter topic: the same
// key, value and headers, plus these headers saying where it came from
// and why it was given up. mqpipe exec writes them (its --dlq) and so does
// the broker's own dead-lettering of share groups (lib/broker), so a
// reader of a dead-letter topic sees one shape whoever wrote it; mqctl
// queue dlq replay reads them.
//
// Every value is text: numbers in decimal.
const (
	// DLQTopic is the topic the record was read from.
	DLQTopic = "mq.dlq.source.topic"
	// DLQPartition is its partition.
	DLQPartition = "mq.dlq.source.partition"
	// DLQOffset is its offset in that partition.
	DLQOffset = "mq.dlq.source.offset"
	// DLQDeliveryCount is how many times it was delivered (attempted)
	// before it was given up.
	DLQDeliveryCount = "mq.dlq.delivery.count"
	// DLQGroup is the consumer or share group that gave it up.
	DLQGroup = "mq.dlq.group"
	// DLQError says why the last attempt failed (for mqpipe exec: the
	// exit status and the tail of the command's stderr).
	DLQError = "mq.dlq.error"
	// DLQPrefix starts every dead-letter header: a replay drops them.
	DLQPrefix = "mq.dlq."
)

// The source headers as mqpipe exec wrote them before it took the
// broker's names; mqctl queue dlq replay still reads them, so dead
// letters already in a topic can be replayed.
const (
	DLQTopicOld     = "mq.dlq.topic"
	DLQPartitionOld = "mq.dlq.partition"
	DLQOffsetOld    = "mq.dlq.offset"
)
