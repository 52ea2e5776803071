// Command mqpipe moves messages between Unix pipes and mq topics: produce
// sends lines of stdin or files, consume prints records to stdout, exec
// runs a command per record. This file and produce.go, consume.go and
// exec.go wire urfave/cli flags to lib/pipe, which holds the logic.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/version"
)

func main() {
	// A closed stdout (mqpipe consume | head) makes writes fail with
	// EPIPE, which consume takes as a quiet, successful end, instead of
	// killing the process with SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(client.Run(newApp(), os.Args))
}

func newApp() *cli.App {
	return &cli.App{
		Name:                      "mqpipe",
		Version:                   version.String(),
		Usage:                     "pipe lines into an mq topic, records out of one, or each record into a command",
		UsageText:                 "mqpipe [-b ADDR] produce -t TOPIC [FLAGS] [FILE...]\nmqpipe [-b ADDR] consume -t TOPIC[,TOPIC...] [FLAGS]\nmqpipe [-b ADDR] exec -t TOPIC -g GROUP [FLAGS] -- COMMAND [ARG...]",
		Description:               description(),
		Flags:                     connectionFlags(),
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // header values may hold commas; lists are split by us
		OnUsageError:              kcatModes,
		Commands: []*cli.Command{
			produceCommand(),
			consumeCommand(),
			execCommand(),
			client.CompletionCommand("mqpipe"),
		},
	}
}

// description is the program's description: the introduction, then each
// command's, the JSON envelope and the exit statuses.
func description() string {
	return introDoc + "\n\n## mqpipe produce\n\n" + produceDoc + "\n\n## mqpipe consume\n\n" + consumeDoc +
		"\n\n## mqpipe exec\n\n" + execDoc + "\n\n## JSON envelope\n\n" + envelopeDoc + "\n\n## Exit status\n\n" + exitDoc
}

const introDoc = `mqpipe connects shell pipelines to mq (or any Kafka broker):

    seq 1000 | mqpipe produce -t numbers
    tail -f app.log | mqpipe produce -t logs
    mqpipe consume -t numbers -e | wc -l
    mqpipe consume -t logs -o -10 -f '%p:%o %s\n'
    mqpipe consume -t src -e --json | mqpipe produce -t copy --format json

The broker is taken from -b/--broker, else $MQ_BROKER, else the default mqd
socket ($MQ_SOCKET, else $XDG_RUNTIME_DIR/mq/mqd.sock, else /run/mq/mqd.sock
for root, else /tmp/mq-$UID/mqd.sock) when it exists, else 127.0.0.1:9092,
which mqpipe says on stderr when stderr is a terminal; -v says which
address is used and why. An address is unix:///path.sock, tcp://host:port
or host:port; several are separated by commas. -b and -v may also be given
after the command.

TLS and SASL: --tls-ca, --tls-cert, --tls-key, --sasl-mechanism,
--sasl-user and --sasl-password-file (else $MQ_SASL_PASSWORD), as every
mq tool takes them, or kcat's -X security.protocol=plaintext|ssl|
sasl_plaintext|sasl_ssl, -X sasl.mechanisms=, -X sasl.username=, -X
sasl.password= (visible in ps, as for kcat) and -X ssl.ca.location=,
ssl.certificate.location=, ssl.key.location=.`

// envelopeDoc documents the JSON envelope of lib/pipe (AppendJSON).
const envelopeDoc = `mqpipe consume --json prints, and mqpipe produce --format json reads,
one record per line as one JSON object:

    {"topic":"t","partition":0,"offset":42,"timestamp":1700000000000,
     "key":"k","value":"hello","headers":[{"key":"h","value":"v"}]}

timestamp is in milliseconds since the Unix epoch. key and value are JSON
strings when their bytes are valid UTF-8, and null when the key or value is
null; other bytes are given as "key_b64" or "value_b64" instead, in
standard base64 with padding, so any record is carried exactly. headers is
a list in record order, always present; each header has "key" (or
"key_b64") and "value" (or "value_b64", or null). Reading, every field is
optional: topic and offset are ignored, a missing partition (or null, or
-1) means by key, a missing timestamp means now, a missing key or value is
null; unknown fields are an error. So consume --json | produce --format
json copies records with their keys, values, headers, timestamps and
partitions. A null value ("value":null, a tombstone) and an empty one
("value":"") are different records, in both directions. Other JSON, such
as {"user":"u1"}, is not an envelope and is not sent: to send JSON lines
as values, produce them without --format json.`

const exitDoc = `Data goes to stdout, diagnostics to stderr. Exit status: 0 success (for
produce: every message acknowledged; for consume: also when stdout was
closed early, as by head, or when stopped by SIGTERM, after committing
what it wrote with -g; for exec: stopped by SIGTERM or SIGINT, or by
--exit-when-idle); 1 the operation failed (messages not sent or not acknowledged,
unknown topic, message too large, exec could not dead-letter a message);
2 usage error; 3 cannot reach the broker; 130 interrupted (SIGINT, and
SIGTERM but for consume; exec: a second one). The reason is given on
stderr in one line.`

// kcatMode maps kcat's mode flags to what mqpipe (or mqctl) does instead.
var kcatMode = map[string]string{
	"-C": "mqpipe consume (kcat -C)",
	"-P": "mqpipe produce (kcat -P)",
	"-L": "mqctl topic list or mqctl cluster describe (kcat -L)",
}

// kcatModes is the app's usage error handler: a kcat mode flag where
// mqpipe wants a command gets a "did you mean"; any other error is the
// usual usage error.
func kcatModes(_ *cli.Context, err error, _ bool) error {
	if flag, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		if instead, ok := kcatMode[flag]; ok {
			return &client.Error{Code: client.ExitUsage, Err: fmt.Errorf("%s is a kcat mode, mqpipe takes a command: did you mean %s?", flag, instead), Help: "mqpipe"}
		}
	}
	return &client.Error{Code: client.ExitUsage, Err: err, Help: "mqpipe"}
}

// splitList splits comma-separated values of a repeatable flag.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// partitionList reads -p values: partition numbers, comma-separated or
// repeated.
func partitionList(values []string) ([]int32, error) {
	var out []int32
	for _, s := range splitList(values) {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return nil, client.Usagef("-p %q: want a partition number (0, 1, ...)", s)
		}
		out = append(out, int32(p))
	}
	return out, nil
}
