package pipe

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// joinWait bounds how long exec --ordered waits for its first partitions
// before it starts counting --exit-when-idle (a member the group gives
// none to counts from then).
const joinWait = 15 * time.Second

// ExecOptions is one run of `mqpipe exec`.
type ExecOptions struct {
	Broker  string          // the -b value; empty: $MQ_BROKER, then the defaults
	TLS     client.TLSFiles // --tls-ca, --tls-cert, --tls-key
	Topics  []string        // -t: topic names
	Group   string          // -g: the share group, or with Ordered the consumer group
	Ordered bool            // --ordered: a consumer group, one command at a time per key
	DLQ     string          // --dlq: the dead-letter topic; empty: none
	// Start is where a new share group starts (--start): earliest or
	// latest; empty: earliest. Not with Ordered.
	Start          string
	SessionTimeout time.Duration // --session-timeout, with Ordered; 0: DefaultSessionTimeout
	Run            ExecConfig    // the command and how to run it
}

func (o *ExecOptions) check() error {
	r := &o.Run
	switch {
	case len(o.Topics) == 0:
		return client.Usagef("exec: -t TOPIC is required")
	case o.Group == "":
		return client.Usagef("exec: -g GROUP is required")
	case len(r.Command) == 0:
		return client.Usagef("exec: missing COMMAND (mqpipe exec -t TOPIC -g GROUP -- COMMAND ARGS...)")
	case r.Jobs < 1:
		return client.Usagef("exec: -j %d: want at least 1 command at once", r.Jobs)
	case r.Attempts < 1:
		return client.Usagef("exec: --attempts %d: want at least 1", r.Attempts)
	case r.Timeout < 0, r.RetryBackoff < 0, r.ExitWhenIdle < 0, r.Grace < 0:
		return client.Usagef("exec: durations may not be negative")
	case !o.Ordered && o.SessionTimeout != 0:
		return client.Usagef("exec: --session-timeout needs --ordered (a share group has the broker's)")
	case o.Ordered && o.Start != "":
		return client.Usagef("exec: --start is for share groups (a new --ordered group starts at the beginning)")
	case o.Start != "" && o.Start != "earliest" && o.Start != "latest":
		return client.Usagef("exec: --start %q: want earliest or latest", o.Start)
	}
	for _, t := range o.Topics {
		if t == "" || strings.HasPrefix(t, "^") {
			return client.Usagef("exec: -t %q: want a topic name", t)
		}
	}
	if _, err := exec.LookPath(r.Command[0]); err != nil {
		return client.Usagef("exec: %v", unwrapExecError(err))
	}
	return nil
}

func unwrapExecError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return errors.New(ee.Name + ": " + ee.Err.Error())
	}
	return err
}

// Exec runs o.Run.Command once per message of o.Topics (RunExec), from a
// share group or, with Ordered, a consumer group. It returns nil when
// stopped by ctx (SIGTERM) or by --exit-when-idle.
func Exec(ctx context.Context, o ExecOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	addrs, admCl, adm, err := connectAdmin(ctx, o.Broker, o.TLS)
	if err != nil {
		return err
	}
	defer admCl.Close()
	if _, err := topicPartitions(ctx, adm, topicSpec{names: o.Topics}, nil); err != nil {
		return err
	}
	if o.DLQ != "" {
		if _, err := topicPartitions(ctx, adm, topicSpec{names: []string{o.DLQ}}, nil); err != nil {
			return client.Failf("--dlq: %v", err)
		}
	}
	newClient := func(opts ...kgo.Opt) (*kgo.Client, error) { return client.NewClient(addrs, opts...) }
	var src Source
	if o.Ordered {
		session := o.SessionTimeout
		if session <= 0 {
			session = DefaultSessionTimeout
		}
		var ord *orderedSource
		if ord, err = newOrderedSource(newClient, o.Topics, o.Group, o.DLQ, session, o.Run.Stderr); err == nil {
			src = ord
			// --exit-when-idle counts from when the worker holds
			// partitions, not from the time joining takes.
			select {
			case <-ord.joined:
			case <-ctx.Done():
			case <-time.After(joinWait):
			}
		}
	} else {
		if err := prepareShareGroup(ctx, admCl, o); err != nil {
			if client.IsUnreachable(err) {
				return client.Unreachable(addrs, err)
			}
			return err
		}
		src, err = newShareSource(newClient, o.Topics, o.Group, o.DLQ, o.Run.Jobs, o.Run.Stderr)
	}
	if err != nil {
		return err
	}
	o.Run.Group = o.Group
	if _, err := RunExec(ctx, o.Run, src); err != nil {
		if client.IsUnreachable(err) {
			return client.Unreachable(addrs, err)
		}
		return client.Failf("exec: %v", err)
	}
	return nil
}

// prepareShareGroup sets a new share group to start at o.Start (default
// earliest), saying so on stderr, and makes --dlq the group's dead-letter
// topic when it has none, so that mqctl queue describe counts the dead
// letters and the broker dead-letters there the records it gives up
// itself (an acquisition lock that ran out at the delivery limit).
func prepareShareGroup(ctx context.Context, cl *kgo.Client, o ExecOptions) error {
	start := o.Start
	if start == "" {
		start = "earliest"
	}
	// One id is one group: the broker refuses a share member for a
	// consumer group's id, so say how to join it instead.
	classic, err := client.IsConsumerGroup(ctx, cl, o.Group)
	if err != nil {
		return fmt.Errorf("group %s: %w", o.Group, err)
	}
	if classic {
		return client.Usagef("exec: %s is a consumer group: join it with --ordered, or name a share group with -g", o.Group)
	}
	st, err := client.StartShareGroup(ctx, cl, o.Group, start)
	if err != nil {
		return fmt.Errorf("share group %s: %w", o.Group, err)
	}
	if st.New {
		fmt.Fprintf(o.Run.Stderr, "mqpipe: %s\n", st.Describe(o.Group))
	}
	if o.DLQ == "" {
		return nil
	}
	cs, err := client.GroupConfigs(ctx, cl, o.Group, client.ShareDeadLetterTopic)
	if err != nil {
		return fmt.Errorf("share group %s: %w", o.Group, err)
	}
	for _, c := range cs {
		switch {
		case c.Name != client.ShareDeadLetterTopic, c.Value == o.DLQ:
		case c.Value != "":
			fmt.Fprintf(o.Run.Stderr, "mqpipe: %s: the group's own dead-letter topic is %s (%s); the broker dead-letters there, mqpipe to --dlq %s\n",
				o.Group, c.Value, client.ShareDeadLetterTopic, o.DLQ)
		default:
			if err := client.AlterGroupConfigs(ctx, cl, o.Group, map[string]string{client.ShareDeadLetterTopic: o.DLQ}, nil); err != nil {
				return fmt.Errorf("share group %s: %w", o.Group, err)
			}
		}
	}
	return nil
}
