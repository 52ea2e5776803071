package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcat runs the kcat binary against b and returns its stdout.
func kcat(t *testing.T, b *broker, stdin string, args ...string) string {
	t.Helper()
	return kcatAt(t, b.addr, stdin, args...)
}

// kcatAt runs kcat with the bootstrap list brokers (-b).
func kcatAt(t *testing.T, brokers string, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	cmd := exec.Command(path, append([]string{"-b", brokers}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("kcat %s did not finish in 60s\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String()
}

func TestKcatMetadataProduceConsume(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "kc"); err != nil {
		t.Fatal(err)
	}

	meta := kcat(t, b, "", "-L")
	for _, want := range []string{"1 brokers:", "broker 1 at " + b.addr, `topic "kc" with 1 partitions:`, "partition 0, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(meta, want) {
			t.Errorf("kcat -L output lacks %q:\n%s", want, meta)
		}
	}

	kcat(t, b, "alpha:one\nbeta:two\ngamma:three\n", "-P", "-t", "kc", "-K:")
	got := kcat(t, b, "", "-C", "-t", "kc", "-e", "-f", `%k %s %o %p\n`)
	want := "alpha one 0 0\nbeta two 1 0\ngamma three 2 0\n"
	if got != want {
		t.Fatalf("kcat consume:\n got %q\nwant %q", got, want)
	}

	// Snappy- and gzip-compressed batches from librdkafka read back too.
	kcat(t, b, "s1:x\n", "-P", "-t", "kc", "-K:", "-z", "snappy")
	kcat(t, b, "g1:y\n", "-P", "-t", "kc", "-K:", "-z", "gzip")
	kcat(t, b, "l1:z\n", "-P", "-t", "kc", "-K:", "-z", "lz4")
	kcat(t, b, "z1:w\n", "-P", "-t", "kc", "-K:", "-z", "zstd")
	got = kcat(t, b, "", "-C", "-t", "kc", "-o", "3", "-e", "-f", `%k %s %o\n`)
	want = "s1 x 3\ng1 y 4\nl1 z 5\nz1 w 6\n"
	if got != want {
		t.Fatalf("kcat consume of compressed batches:\n got %q\nwant %q", got, want)
	}
}

// TestKcatJSONMatchesMqpipeJ: the same records consumed with kcat -C -J
// -e and with mqpipe consume -J -e (reading the partitions, and as a
// group member) print the same lines, field by field: keys and no keys,
// null and empty keys and values, headers (repeated names, null and empty
// values), control characters, bytes that are not UTF-8, both partitions
// of a topic and a topic with log-append times, and the broker each was
// fetched from.
func TestKcatJSONMatchesMqpipeJ(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	logAppend := "LogAppendTime"
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "kj"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin().CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": &logAppend}, "kla"); err != nil {
		t.Fatal(err)
	}

	// Text the kcat way, on both partitions.
	kcat(t, b, "plain\n", "-P", "-t", "kj", "-p", "0")
	kcat(t, b, "k1:v1\n", "-P", "-t", "kj", "-p", "1", "-K:")
	kcat(t, b, "k2:v2\n", "-P", "-t", "kj", "-p", "0", "-K:", "-H", "h1=x", "-H", "h2=y", "-H", "h1=z", "-H", "empty=", "-H", "novalue")
	kcat(t, b, "tomb:\n:\n", "-P", "-t", "kj", "-p", "1", "-K:", "-Z")
	kcat(t, b, ":\n", "-P", "-t", "kj", "-p", "1", "-K:")
	kcat(t, b, "x\n", "-P", "-t", "kla")
	// Bytes kcat -P cannot take from a line: every control character,
	// DEL, UTF-8 (U+2028 too) and bytes that are not UTF-8.
	odd := []byte("q\"b\\s/")
	for c := byte(0); c < 0x20; c++ {
		odd = append(odd, c)
	}
	odd = append(odd, "\x7fé\u2028€😀\xff\xfe\xc0\xaf\xed\xa0\x80 end"...)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range []*kgo.Record{
		{Topic: "kj", Partition: 0, Key: []byte("k\"\\\x01\xff"), Value: odd},
		{Topic: "kj", Partition: 1, Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "hb\xfe", Value: odd}, {Key: "", Value: nil}}},
	} {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	for _, topic := range []string{"kj", "kla"} {
		want := kcatJSONLines(t, kcat(t, b, "", "-C", "-t", topic, "-J", "-e", "-q"))
		for _, args := range [][]string{
			{"consume", "-t", topic, "-J", "-e"},
			{"consume", "-t", topic, "-J", "-e", "-g", "kj-" + topic},
		} {
			out, stderr, code := tool(t, ctx, b, "mqpipe", args...)
			if code != 0 {
				t.Fatalf("mqpipe %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			}
			got := kcatJSONLines(t, out)
			name := "mqpipe " + strings.Join(args, " ")
			if len(got) != len(want) {
				t.Errorf("%s printed %d records, kcat -J %d:\n%s", name, len(got), len(want), out)
			}
			for at, w := range want {
				g, ok := got[at]
				if !ok {
					t.Errorf("%s: no record at partition %d offset %d; kcat printed\n%s", name, at[0], at[1], w.line)
					continue
				}
				for _, f := range w.fields {
					if gv, ok := g.values[f]; !ok || !bytes.Equal(gv, w.values[f]) {
						t.Errorf("%s: partition %d offset %d: field %s is %q, kcat -J has %q", name, at[0], at[1], f, gv, w.values[f])
					}
				}
				if strings.Join(g.fields, ",") != strings.Join(w.fields, ",") {
					t.Errorf("%s: partition %d offset %d: fields %v, kcat -J has %v", name, at[0], at[1], g.fields, w.fields)
				}
				if g.line != w.line {
					t.Errorf("%s: partition %d offset %d: line differs:\nmqpipe %q\nkcat   %q", name, at[0], at[1], g.line, w.line)
				}
			}
		}
	}
}

// kcatJSONLine is one line of kcat -J output: its fields in order, and
// each field's JSON text as printed.
type kcatJSONLine struct {
	line   string
	fields []string
	values map[string][]byte
}

// kcatJSONLines splits the output of kcat -J (or mqpipe -J) into its
// lines, by partition and offset.
func kcatJSONLines(t *testing.T, out string) map[[2]int64]kcatJSONLine {
	t.Helper()
	lines := map[[2]int64]kcatJSONLine{}
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Fatalf("a line without its newline: %q", line)
		}
		l := kcatJSONLine{line: line, values: map[string][]byte{}}
		dec := json.NewDecoder(strings.NewReader(line))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("not a JSON object (%v): %q", err, line)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			name := tok.(string)
			l.fields = append(l.fields, name)
			l.values[name] = v
		}
		var partition, offset int64
		if err := json.Unmarshal(l.values["partition"], &partition); err != nil {
			t.Fatalf("partition: %v: %q", err, line)
		}
		if err := json.Unmarshal(l.values["offset"], &offset); err != nil {
			t.Fatalf("offset: %v: %q", err, line)
		}
		lines[[2]int64{partition, offset}] = l
	}
	return lines
}
