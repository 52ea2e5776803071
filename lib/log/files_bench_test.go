package log

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkAppendManyLogs appends 1 KiB batches to 1,000 logs in turn,
// with every log's segment file kept open (files=all) and with 64 files
// for them all (files=64): then each append opens its file again and
// closes the least recently used one.
func BenchmarkAppendManyLogs(b *testing.B) {
	const nLogs = 1000
	for _, bound := range []int{2 * nLogs, 64} {
		name := "files=all"
		if bound < nLogs {
			name = fmt.Sprintf("files=%d", bound)
		}
		b.Run(name, func(b *testing.B) {
			files := NewFiles(bound)
			root := b.TempDir()
			logs := make([]*Log, nLogs)
			for i := range logs {
				l, err := Open(filepath.Join(root, fmt.Sprintf("bench-%d", i)), DefaultConfig(), Options{Files: files})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				logs[i] = l
			}
			batch := benchBatch(b, 1<<10)
			for _, l := range logs { // the first append checkpoints the leader epoch
				if _, err := l.Append(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := logs[i%nLogs].Append(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportBatches(b, b.N)
		})
	}
}
