// Package tags holds the fields mq adds to Kafka responses as tagged fields
// (KIP-482), which only mq's own tools read. A Kafka client skips tags it
// does not know, so these cost other clients nothing and break none.
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
//	tags.Set(&dir.UnknownTags, tags.LogDir, health)   // mqd
//	var health tags.DirHealth
//	ok, err := tags.Get(&dir.UnknownTags, tags.LogDir, &health) // mqctl
//
// The fields exist only in the flexible versions of a message (where Kafka
// has tagged fields at all); a request at an older version gets none.
package tags
