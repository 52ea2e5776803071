package partition

// ShareSource is a hosted partition as lib/queue's share-partitions read
// it (queue.Source): its log start offset and high-water mark, and whole
// batches copied out of the log.
type ShareSource struct{ *Hosted }

// Offsets returns the log start offset and the high-water mark.
func (s ShareSource) Offsets() (logStart, highWatermark int64) {
	info := s.Hosted.Offsets()
	return info.LogStartOffset, info.HighWatermark
}

// ReadBatches reads whole batches from the one holding offset on, below
// the high-water mark, up to maxBytes (the first whole, however large),
// and returns them with the offset after the last one. The bytes are
// copied out of the log: a share fetch's records go to the member after
// its state write is durable, with the log free to change meanwhile.
func (s ShareSource) ReadBatches(offset int64, maxBytes int) ([]byte, int64, error) {
	var buf []byte
	next := offset
	for {
		budget := maxBytes - len(buf)
		if len(buf) > 0 && budget <= 0 {
			break
		}
		region, _, err := s.Read(next, max(budget, 1), -1)
		if err != nil {
			if len(buf) > 0 {
				break // serve what was read; the error comes again next time
			}
			return nil, 0, err
		}
		if region.Len == 0 {
			region.Release()
			break
		}
		start := len(buf)
		buf = append(buf, make([]byte, region.Len)...)
		_, err = region.ReadAt(buf[start:], 0)
		last := region.LastOffset
		region.Release()
		if err != nil {
			return nil, 0, err
		}
		next = last + 1
	}
	return buf, next, nil
}
