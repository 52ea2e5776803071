package kafkaext

// Headers of a dead-lettered record. When a record could not be processed
// within its attempt limit, a copy goes to a dead-letter topic: the same
// key, value and headers, plus these headers saying where it came from
// and why it was given up. mqpipe exec writes them (its --dlq); the
// broker's own dead-lettering of share groups uses the same names, so a
// reader of a dead-letter topic sees one shape whoever wrote it.
//
// Every value is text: numbers in decimal.
const (
	// DLQTopic is the topic the record was read from.
	DLQTopic = "mq.dlq.topic"
	// DLQPartition is its partition.
	DLQPartition = "mq.dlq.partition"
	// DLQOffset is its offset in that partition.
	DLQOffset = "mq.dlq.offset"
	// DLQDeliveryCount is how many times it was delivered (attempted)
	// before it was given up.
	DLQDeliveryCount = "mq.dlq.delivery.count"
	// DLQGroup is the consumer or share group that gave it up.
	DLQGroup = "mq.dlq.group"
	// DLQError says why the last attempt failed (for mqpipe exec: the
	// exit status and the tail of the command's stderr).
	DLQError = "mq.dlq.error"
)
