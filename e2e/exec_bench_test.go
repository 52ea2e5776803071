package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkExecOrderedTrue is mqpipe exec --ordered's cost per message
// with true as the command, against a real mqd: b.N keyed messages are
// produced first, then one worker runs them all (-j 1 and -j 8) and exits
// 200 ms after the last (--exit-when-idle; the joining and the idle wait
// are part of the figure, amortized over b.N).
//
//	go test -run '^$' -bench BenchmarkExecOrderedTrue -benchtime 5000x ./e2e
func BenchmarkExecOrderedTrue(b *testing.B) {
	for _, jobs := range []int{1, 8} {
		b.Run(fmt.Sprintf("j=%d", jobs), func(b *testing.B) {
			br := startBroker(b, brokerOpts{props: []string{"group.initial.rebalance.delay.ms=0"}})
			cl := br.client(kgo.DefaultProduceTopic("bench"), kgo.AllowAutoTopicCreation())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for i := 0; i < b.N; i++ {
				cl.Produce(ctx, &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v")}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mqpipe"), "exec", "-b", br.addr, "-t", "bench", "-g", "g", "--ordered",
				"-j", strconv.Itoa(jobs), "--exit-when-idle", "200ms", "--", "true")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("mqpipe exec: %v\n%s", err, out)
			}
			b.StopTimer()
			lag, err := br.admin().Lag(ctx, "g")
			if err != nil {
				b.Fatal(err)
			}
			if err := lag.Error(); err != nil {
				b.Fatal(err)
			}
			if total := lag["g"].Lag.Total(); total != 0 {
				b.Fatalf("lag %d after the run; want every message done and committed", total)
			}
		})
	}
}
