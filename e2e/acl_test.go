package e2e

import (
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/record"
)

// wantCode fails unless err is the Kafka error want (nil: no error).
func wantCode(t *testing.T, what string, err error, want *kerr.Error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s: %v, want success", what, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("%s: %v, want %s", what, err, want.Message)
	}
}

// TestACLMatrix runs mqd with an mTLS listener (so
// allow.everyone.if.no.acl.found defaults to false) and two certificate
// users, alice and bob, beside root on the Unix socket (a super user by
// default): for each API family a principal without the operation gets
// Kafka's code, and succeeds once an ACL allows it; Metadata hides what
// a principal may not describe; prefixed patterns; deny over allow; and
// no one, a super user included, produces to __consumer_offsets.
func TestACLMatrix(t *testing.T) {
	tb := startTLSBroker(t, "required")
	bobFiles := tb.ca.WriteFiles(t, tb.dir, "bob", mqtest.Leaf{Subject: pkix.Name{CommonName: "bob"}, Client: true})
	const alice, bob = "User:CN=alice,O=example", "User:CN=bob"
	ctx := ctxFor(t, 2*time.Minute)

	root := kadm.NewClient(tb.unixClient())
	aliceCl := tb.tlsClient(t, &tb.alice, kgo.DisableIdempotentWrite())
	aliceAdm := kadm.NewClient(aliceCl)
	bobCl := tb.tlsClient(t, &bobFiles, kgo.DisableIdempotentWrite())
	bobAdm := kadm.NewClient(bobCl)

	for _, name := range []string{"orders", "orders-eu", "secret"} {
		if _, err := root.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("root creating %s: %v", name, err)
		}
	}
	produce := func(cl *kgo.Client, topic string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	acl := func() *kadm.ACLBuilder { return kadm.NewACLs().ResourcePatternType(kadm.ACLPatternLiteral) }
	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := root.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating %+v: %v", r, r.Err)
			}
		}
	}

	// Nothing allowed yet: each family refuses with its code.
	wantCode(t, "alice produce", produce(aliceCl, "orders"), kerr.TopicAuthorizationFailed)
	topics, err := aliceAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 0 {
		t.Errorf("alice lists %v before any ACL, want nothing", names)
	}
	_, err = aliceAdm.CreatePartitions(ctx, 2, "orders")
	wantCode(t, "alice create partitions", firstErr(err, func() error {
		r, _ := aliceAdm.CreatePartitions(ctx, 2, "orders")
		return r["orders"].Err
	}), kerr.TopicAuthorizationFailed)
	dt, err := aliceAdm.DeleteTopics(ctx, "secret")
	wantCode(t, "alice delete topic", firstErr(err, func() error { return dt["secret"].Err }), kerr.TopicAuthorizationFailed)
	dg, err := aliceAdm.DescribeGroups(ctx, "g")
	wantCode(t, "alice describe group", firstErr(err, func() error { return dg["g"].Err }), kerr.GroupAuthorizationFailed)
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	daResp, err := da.RequestWith(ctx, aliceCl)
	wantCode(t, "alice describe ACLs", firstErr(err, func() error { return kerr.ErrorForCode(daResp.ErrorCode) }), kerr.ClusterAuthorizationFailed)
	_, err = aliceAdm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}}})
	wantCode(t, "alice elect leaders", err, kerr.ClusterAuthorizationFailed)
	acs, err := aliceAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, "orders")
	wantCode(t, "alice alter configs", firstErr(err, func() error { return acs[0].Err }), kerr.TopicAuthorizationFailed)

	// The ACLs: alice writes and reads orders, in group g, and alters it;
	// bob writes every orders* topic but orders-eu.
	create(acl().Allow(alice).Topics("orders").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpAlter, kadm.OpAlterConfigs))
	create(acl().Allow(alice).Groups("g").Operations(kadm.OpRead))
	create(kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed).Allow(bob).Topics("orders").Operations(kadm.OpWrite))
	create(acl().Deny(bob).Topics("orders-eu").Operations(kadm.OpWrite))

	wantCode(t, "alice produce to orders", produce(aliceCl, "orders"), nil)
	wantCode(t, "alice produce to orders-eu", produce(aliceCl, "orders-eu"), kerr.TopicAuthorizationFailed)
	wantCode(t, "bob produce to orders (prefixed)", produce(bobCl, "orders"), nil)
	wantCode(t, "bob produce to orders-eu (deny over allow)", produce(bobCl, "orders-eu"), kerr.TopicAuthorizationFailed)
	wantCode(t, "bob produce to secret", produce(bobCl, "secret"), kerr.TopicAuthorizationFailed)
	// A client of its own: alice's producer client has asked for topics
	// it may not describe, which kgo remembers.
	topics, err = kadm.NewClient(tb.tlsClient(t, &tb.alice)).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "orders" {
		t.Errorf("alice lists %v, want [orders]", names)
	}
	cp, err := aliceAdm.CreatePartitions(ctx, 1, "orders")
	wantCode(t, "alice create partitions with ALTER", firstErr(err, func() error { return cp["orders"].Err }), nil)
	acs, err = aliceAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("600000")}}, "orders")
	wantCode(t, "alice alter configs with ALTER_CONFIGS", firstErr(err, func() error { return acs[0].Err }), nil)

	// Groups: alice consumes orders in g and commits; bob may not read g.
	consumer := tb.tlsClient(t, &tb.alice, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	for got := 0; got < 2; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("alice consuming orders in g: %d records: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("alice consuming: %v", err) })
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice committing in g: %v", err)
	}
	offs, err := bobAdm.FetchOffsets(ctx, "g")
	wantCode(t, "bob fetching g's offsets", firstErr(err, func() error { return offs.Error() }), kerr.GroupAuthorizationFailed)
	offs, err = aliceAdm.FetchOffsets(ctx, "g")
	wantCode(t, "alice fetching g's offsets", firstErr(err, func() error { return offs.Error() }), nil)

	// Reading needs READ (bob only writes orders); describing offsets
	// DESCRIBE, which bob's WRITE implies.
	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID, fr.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	td, err := root.ListTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	ft.TopicID = td["orders"].ID
	fr.Topics[0].TopicID = ft.TopicID
	fetchCode := func(cl *kgo.Client) error {
		resp, err := fr.RequestWith(ctx, cl)
		return firstErr(err, func() error { return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode) })
	}
	wantCode(t, "bob fetching orders", fetchCode(bobCl), kerr.TopicAuthorizationFailed)
	wantCode(t, "alice fetching orders", fetchCode(aliceCl), nil)
	// With a topic alice may not read in the same request, orders is
	// still served.
	td, err = root.ListTopics(ctx, "orders-eu")
	if err != nil {
		t.Fatal(err)
	}
	eu := ft
	eu.TopicID = td["orders-eu"].ID
	fr.Topics = append(fr.Topics, eu)
	if resp, err := fr.RequestWith(ctx, aliceCl); err != nil {
		t.Fatal(err)
	} else if a, b := resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode; a != 0 || b != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice fetching orders and orders-eu: %v and %v, want success and TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(a), kerr.ErrorForCode(b))
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "secret"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	listCode := func(cl *kgo.Client, topic string) error {
		lo.Topics[0].Topic = topic
		resp, err := lo.RequestWith(ctx, cl)
		return firstErr(err, func() error { return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode) })
	}
	wantCode(t, "bob listing offsets of secret", listCode(bobCl, "secret"), kerr.TopicAuthorizationFailed)
	wantCode(t, "bob listing offsets of orders", listCode(bobCl, "orders"), nil)

	// An idempotent producer needs WRITE on some topic (or
	// IDEMPOTENT_WRITE on the cluster): carol has neither.
	carol := tb.ca.WriteFiles(t, tb.dir, "carol", mqtest.Leaf{Subject: pkix.Name{CommonName: "carol"}, Client: true})
	carolCl := tb.tlsClient(t, &carol)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = -1
	initCode := func(cl *kgo.Client) error {
		resp, err := ip.RequestWith(ctx, cl)
		return firstErr(err, func() error { return kerr.ErrorForCode(resp.ErrorCode) })
	}
	wantCode(t, "carol's InitProducerId", initCode(carolCl), kerr.ClusterAuthorizationFailed)
	wantCode(t, "alice's InitProducerId", initCode(aliceCl), nil)

	// The cluster and the remaining topic operations, once allowed.
	create(acl().Allow(bob).Clusters().Operations(kadm.OpAlter))
	_, err = bobAdm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}}})
	wantCode(t, "bob electing leaders with ALTER on the cluster", err, nil)
	create(acl().Allow(alice).Topics("secret").Operations(kadm.OpDelete))
	dt, err = aliceAdm.DeleteTopics(ctx, "secret")
	wantCode(t, "alice deleting secret with DELETE", firstErr(err, func() error { return dt["secret"].Err }), nil)
	dg, err = aliceAdm.DescribeGroups(ctx, "g")
	wantCode(t, "alice describing g (READ implies DESCRIBE)", firstErr(err, func() error { return dg["g"].Err }), nil)

	// Internal topics: refused to everyone, root included.
	rootCl := tb.unixClient(kgo.DisableIdempotentWrite())
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "__consumer_offsets"
	// A well-formed tombstone of the key a group's offsets would have.
	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Key: []byte("\x00\x01\x00\x01g")}})
	if err != nil {
		t.Fatal(err)
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, rootCl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("root producing to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}
	// The coordinator's own writes go on: alice commits again.
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("alice committing after the refused produce: %v", err)
	}
}

// firstErr is err, or else what more says.
func firstErr(err error, more func() error) error {
	if err != nil {
		return err
	}
	return more()
}

// TestMqctlACL manages the ACLs with mqctl as root on the Unix socket, as
// an operator does before any user exists, and checks what they allow
// with alice's certificate client.
func TestMqctlACL(t *testing.T) {
	tb := startTLSBroker(t, "required")
	const alice = "User:CN=alice,O=example"
	ctx := ctxFor(t, 2*time.Minute)
	sock := "unix://" + tb.socket
	mqctl := func(args ...string) toolResult {
		t.Helper()
		return runTool(t, time.Minute, "", "mqctl", append([]string{"-b", sock}, args...)...)
	}
	if r := mqctl("topic", "create", "orders"); r.code != 0 {
		t.Fatalf("topic create: %d %s", r.code, r.stderr)
	}
	aliceCl := tb.tlsClient(t, &tb.alice, kgo.DisableIdempotentWrite())
	produce := func() error {
		return aliceCl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr()
	}
	wantCode(t, "alice before any ACL", produce(), kerr.TopicAuthorizationFailed)

	r := mqctl("acl", "add", "--allow", alice, "--operation", "write", "--topic", "orders")
	if r.code != 0 || !strings.Contains(r.stdout, "topic") || !strings.Contains(r.stdout, alice) {
		t.Fatalf("acl add: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantCode(t, "alice with WRITE", produce(), nil)

	r = mqctl("acl", "add", "--deny", "User:*", "--operation", "all", "--topic", "ord", "--resource-pattern-type", "prefixed", "--host", "10.9.9.9")
	if r.code != 0 {
		t.Fatalf("acl add --deny: exit %d: %s", r.code, r.stderr)
	}
	r = mqctl("acl", "list", "-o", "json", "--resource-pattern-type", "match", "--topic", "orders")
	var listed []map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || r.code != 0 {
		t.Fatalf("acl list -o json: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	want := []map[string]string{
		{"resource_type": "topic", "resource_name": "ord", "pattern_type": "prefixed", "principal": "User:*", "host": "10.9.9.9", "operation": "all", "permission": "deny"},
		{"resource_type": "topic", "resource_name": "orders", "pattern_type": "literal", "principal": alice, "host": "*", "operation": "write", "permission": "allow"},
	}
	if !reflect.DeepEqual(listed, want) {
		t.Fatalf("acl list:\n got %v\nwant %v", listed, want)
	}
	// The deny is for another host: alice still writes.
	wantCode(t, "alice beside a deny from another host", produce(), nil)

	r = mqctl("acl", "remove", "--topic", "orders", "--allow", alice)
	if r.code != 0 || !strings.Contains(r.stdout, "write") {
		t.Fatalf("acl remove: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantCode(t, "alice after the remove", produce(), kerr.TopicAuthorizationFailed)

	for _, args := range [][]string{
		{"acl", "add", "--allow", "alice", "--operation", "write", "--topic", "orders"},
		{"acl", "add", "--allow", alice, "--operation", "frobnicate", "--topic", "orders"},
		{"acl", "add", "--allow", alice, "--operation", "write"},
		{"acl", "remove", "--allow", alice},
		{"acl", "list", "--resource-pattern-type", "sideways"},
	} {
		r := mqctl(args...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
			t.Errorf("mqctl %s: exit %d, stdout %q, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Without ALTER on the cluster alice may not add ACLs.
	r = runTool(t, time.Minute, "", "mqctl", "-b", "ssl://"+tb.sslAddr, "--tls-ca", tb.server.CA, "--tls-cert", tb.alice.Cert, "--tls-key", tb.alice.Key,
		"acl", "add", "--allow", alice, "--operation", "all", "--topic", "*")
	if r.code != 1 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("alice adding an ACL: exit %d, stderr %q; want 1 and CLUSTER_AUTHORIZATION_FAILED", r.code, r.stderr)
	}
}
