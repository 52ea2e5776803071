package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/mqtest"
)

// rdkafkaTxnScript is librdkafka's transactional producer (through
// python3-confluent-kafka): two committed transactions and one aborted
// between them, then a read_committed consumer and a read_uncommitted
// one reading the topic to its end. It prints what each consumer read,
// one value a line after a header.
const rdkafkaTxnScript = `
import sys
from confluent_kafka import Producer, Consumer, KafkaException

bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rdkafka-txn", "linger.ms": 5})
p.init_transactions(30)
for name, commit in (("one", True), ("aborted", False), ("two", True)):
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value="%s-%d" % (name, i), key="k%d" % i)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)

def read(isolation, want):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rdkafka-" + isolation,
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.partition.eof": True})
    c.subscribe([topic])
    got = []
    eofs = 0
    while eofs == 0 or len(got) < want:
        m = c.poll(30)
        if m is None:
            raise SystemExit("%s: nothing within 30 s after %d records" % (isolation, len(got)))
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eofs += 1
                continue
            raise KafkaException(m.error())
        got.append(m.value().decode())
    c.close()
    print(isolation)
    for v in got:
        print(v)

read("read_committed", 10)
read("read_uncommitted", 15)
`

// TestLibrdkafkaTransactionsCommitAndAbort: librdkafka's transactional
// producer commits and aborts against mqd, and its read_committed
// consumer reads the committed transactions whole and nothing of the
// aborted one, which its read_uncommitted consumer does read.
func TestLibrdkafkaTransactionsCommitAndAbort(t *testing.T) {
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import confluent_kafka").Run(); err != nil {
		if mqtest.InCI() {
			t.Fatal("python3-confluent-kafka is missing: .ci/run installs it")
		}
		t.Skip("python3-confluent-kafka not installed (CI installs it: apt-get install python3-confluent-kafka)")
	}
	b := startBroker(t, brokerOpts{})
	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(rdkafkaTxnScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script, b.addr, "rdkafka-txn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("librdkafka's transactions against mqd: %v\n%s\nmqd's log:\n%s", err, out, tail(b.stderr.String(), 30))
	}
	var committed, all []string
	var into *[]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch line {
		case "read_committed":
			into = &committed
		case "read_uncommitted":
			into = &all
		default:
			if into == nil {
				t.Fatalf("unexpected output: %q\n%s", line, out)
			}
			*into = append(*into, line)
		}
	}
	var want, wantAll []string
	for _, name := range []string{"one", "aborted", "two"} {
		for i := range 5 {
			v := name + "-" + string(rune('0'+i))
			wantAll = append(wantAll, v)
			if name != "aborted" {
				want = append(want, v)
			}
		}
	}
	if strings.Join(committed, ",") != strings.Join(want, ",") {
		t.Fatalf("read_committed read %v, want %v", committed, want)
	}
	if strings.Join(all, ",") != strings.Join(wantAll, ",") {
		t.Fatalf("read_uncommitted read %v, want %v", all, wantAll)
	}
}
