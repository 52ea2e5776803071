package admin

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

func TestParseConfigs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
		code int
	}{
		{nil, "map[]", 0},
		{[]string{"a=1", "b=x=y", "c="}, "map[a:1 b:x=y c:]", 0},
		{[]string{" a =1"}, "map[a:1]", 0},
		{[]string{"a"}, "", client.ExitUsage},
		{[]string{"=1"}, "", client.ExitUsage},
		{[]string{"a=1", "a=2"}, "", client.ExitUsage},
	} {
		got, err := ParseConfigs("test", tc.in)
		if client.ExitCode(err) != tc.code || tc.code == 0 && fmt.Sprint(got) != tc.want {
			t.Errorf("ParseConfigs(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestParseOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		code int
	}{
		{"0", 0, 0}, {"42", 42, 0}, {"end", -1, 0}, {"hw", -1, 0},
		{"-1", 0, client.ExitUsage}, {"x", 0, client.ExitUsage}, {"", 0, client.ExitUsage},
	} {
		got, err := ParseOffset("test", tc.in)
		if got != tc.want || client.ExitCode(err) != tc.code {
			t.Errorf("ParseOffset(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestParseConfigTarget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want ConfigTarget
		rest string
		code int
	}{
		{[]string{"topic", "t", "a", "b"}, ConfigTarget{ResourceTopic, "t"}, "[a b]", 0},
		{[]string{"topics", "t"}, ConfigTarget{ResourceTopic, "t"}, "[]", 0},
		{[]string{"broker"}, ConfigTarget{ResourceBroker, ""}, "[]", 0},
		{[]string{"broker", "3", "x=1"}, ConfigTarget{ResourceBroker, "3"}, "[x=1]", 0},
		{[]string{"broker", "default", "num.partitions"}, ConfigTarget{ResourceBroker, ClusterDefault}, "[num.partitions]", 0},
		{[]string{"broker", "num.partitions"}, ConfigTarget{ResourceBroker, ""}, "[num.partitions]", 0},
		{[]string{"broker", "-1"}, ConfigTarget{}, "", client.ExitUsage},
		{[]string{"topic"}, ConfigTarget{}, "", client.ExitUsage},
		{[]string{}, ConfigTarget{}, "", client.ExitUsage},
		{[]string{"group", "g", "share.auto.offset.reset=earliest"}, ConfigTarget{ResourceGroup, "g"}, "[share.auto.offset.reset=earliest]", 0},
		{[]string{"group"}, ConfigTarget{}, "", client.ExitUsage},
		{[]string{"consumer", "g"}, ConfigTarget{}, "", client.ExitUsage},
	} {
		got, rest, err := ParseConfigTarget("test", tc.args)
		if client.ExitCode(err) != tc.code {
			t.Errorf("%q: err %v", tc.args, err)
			continue
		}
		if tc.code == 0 && (got != tc.want || fmt.Sprint(rest) != tc.rest) {
			t.Errorf("%q: got %+v %v, want %+v %s", tc.args, got, rest, tc.want, tc.rest)
		}
	}
}

func TestUsageChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"topics ok", CheckTopicNames("x", []string{"a", "b"}), 0},
		{"no topics", CheckTopicNames("x", nil), client.ExitUsage},
		{"empty topic", CheckTopicNames("x", []string{""}), client.ExitUsage},
		{"twice", CheckTopicNames("x", []string{"a", "a"}), client.ExitUsage},
		{"alter partitions", AlterTopics{Topics: []string{"a"}, Partitions: 2}.Check(), 0},
		{"alter nothing", AlterTopics{Topics: []string{"a"}}.Check(), client.ExitUsage},
		{"alter negative", AlterTopics{Topics: []string{"a"}, Partitions: -1}.Check(), client.ExitUsage},
		{"alter set and delete", AlterTopics{Topics: []string{"a"}, Set: map[string]string{"k": "v"}, Delete: []string{"k"}}.Check(), client.ExitUsage},
		{"alter execute and dry run", AlterTopics{Topics: []string{"a"}, Partitions: 2, Execute: true, DryRun: true}.Check(), client.ExitUsage},
		{"alter sample", AlterTopics{Topics: []string{"a"}, Partitions: 2, SampleKeys: 10}.Check(), 0},
		{"alter sample without partitions", AlterTopics{Topics: []string{"a"}, Set: map[string]string{"k": "v"}, SampleKeys: 10}.Check(), client.ExitUsage},
		{"alter sample negative", AlterTopics{Topics: []string{"a"}, Partitions: 2, SampleKeys: -1}.Check(), client.ExitUsage},
		{"change ok", CheckConfigChange("x", nil, []string{"k"}), 0},
		{"change nothing", CheckConfigChange("x", nil, nil), client.ExitUsage},
		{"change both", CheckConfigChange("x", map[string]string{"k": "v"}, []string{"k"}), client.ExitUsage},
	} {
		if got := client.ExitCode(tc.err); got != tc.code {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, got, tc.err, tc.code)
		}
	}
}

func TestErrText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		msg  string
		want string
	}{
		{kerr.TopicAlreadyExists, "", "TOPIC_ALREADY_EXISTS: Topic with this name already exists."},
		{kerr.TopicAlreadyExists, `topic "a" already exists`, `TOPIC_ALREADY_EXISTS: topic "a" already exists`},
		{fmt.Errorf("wrapped: %w", kerr.InvalidConfig), "bad", "INVALID_CONFIG: bad"},
		{fmt.Errorf("plain"), "", "plain"},
		{fmt.Errorf("plain"), "more", "plain: more"},
	} {
		if got := errText(tc.err, tc.msg); got != tc.want {
			t.Errorf("errText(%v, %q) = %q, want %q", tc.err, tc.msg, got, tc.want)
		}
	}
}

func TestFailuresJoinIntoOneError(t *testing.T) {
	if err := failures("x", nil); err != nil {
		t.Errorf("no failures: %v", err)
	}
	err := failures("topic create", []string{"a: boom", "b: bang"})
	if client.ExitCode(err) != client.ExitFailure || err.Error() != "topic create: 2 failed: a: boom; b: bang" {
		t.Errorf("got %v", err)
	}
}

func str(s string) *string { return &s }

func TestResultsRender(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         Result
		table     string
		jsonShape string
	}{
		{
			name: "topic list",
			r:    TopicList{{Topic: "a", Partitions: 3, ReplicationFactor: 1}, {Topic: "__consumer_offsets", Partitions: 50, ReplicationFactor: 1, Internal: true}},
			table: "TOPIC               PARTITIONS  REPLICATION-FACTOR\n" +
				"a                   3           1\n" +
				"__consumer_offsets  50          1\n",
			jsonShape: `[{"topic":"a","partitions":3,"replication_factor":1,"internal":false},{"topic":"__consumer_offsets","partitions":50,"replication_factor":1,"internal":true}]`,
		},
		{
			name:      "empty topic list",
			r:         TopicList{},
			table:     "TOPIC  PARTITIONS  REPLICATION-FACTOR\n",
			jsonShape: `[]`,
		},
		{
			name: "describe",
			r: TopicDescriptions{{Topic: "t", ID: "AAAA", Partitions: []PartitionDescription{
				{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, OfflineReplicas: []int32{2}, LogStartOffset: 5, HighWatermark: 9},
				{Partition: 1, Leader: -1, Replicas: []int32{2}, ISR: []int32{}, OfflineReplicas: []int32{}, LogStartOffset: -1, HighWatermark: -1, Error: "LEADER_NOT_AVAILABLE"},
			}}},
			table: "TOPIC  PARTITION  LEADER  REPLICAS  ISR  OFFLINE  LOG-START  HIGH-WATERMARK  ERROR\n" +
				"t      0          1       1,2       1    2        5          9               -\n" +
				"t      1          none    2         -    -        ?          ?               LEADER_NOT_AVAILABLE\n",
			jsonShape: `[{"topic":"t","id":"AAAA","internal":false,"partitions":[` +
				`{"partition":0,"leader":1,"leader_epoch":0,"replicas":[1,2],"isr":[1],"offline_replicas":[2],"log_start_offset":5,"high_watermark":9},` +
				`{"partition":1,"leader":-1,"leader_epoch":0,"replicas":[2],"isr":[],"offline_replicas":[],"log_start_offset":-1,"high_watermark":-1,"error":"LEADER_NOT_AVAILABLE"}]}]`,
		},
		{
			name: "describe with damage",
			r: TopicDescriptions{{Topic: "t", ID: "AAAA", Partitions: []PartitionDescription{
				{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, OfflineReplicas: []int32{}, LogStartOffset: 0, HighWatermark: 90,
					Damaged: []ReplicaDamage{{Broker: 1, FromOffset: 20, ToOffset: 40, Segment: "00000000000000000000.log", Position: 512, Length: 300, Reason: "crc", DetectedMillis: 7},
						{Broker: 1, FromOffset: 60, ToOffset: 61, Segment: "00000000000000000050.log", Reason: "gone", Skipped: true}}},
				{Partition: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, OfflineReplicas: []int32{}, LogStartOffset: 0, HighWatermark: 3},
			}}},
			table: "TOPIC  PARTITION  LEADER  REPLICAS  ISR  OFFLINE  LOG-START  HIGH-WATERMARK  DAMAGED\n" +
				"t      0          1       1         1    -        0          90              offsets 20-39 on 1, skipped 60-60 on 1\n" +
				"t      1          1       1         1    -        0          3               -\n",
			jsonShape: `[{"topic":"t","id":"AAAA","internal":false,"partitions":[` +
				`{"partition":0,"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1],"offline_replicas":[],"log_start_offset":0,"high_watermark":90,"damaged":[` +
				`{"broker":1,"from_offset":20,"to_offset":40,"segment":"00000000000000000000.log","position":512,"length":300,"reason":"crc","detected_ms":7,"skipped":false},` +
				`{"broker":1,"from_offset":60,"to_offset":61,"segment":"00000000000000000050.log","position":0,"length":0,"reason":"gone","detected_ms":0,"skipped":true}]},` +
				`{"partition":1,"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1],"offline_replicas":[],"log_start_offset":0,"high_watermark":3}]}]`,
		},
		{
			name: "describe a compacted topic",
			r: TopicDescriptions{{Topic: "t", ID: "AAAA", Partitions: []PartitionDescription{
				{Partition: 0, Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, OfflineReplicas: []int32{}, LogStartOffset: 0, HighWatermark: 90,
					Cleaner: []ReplicaCleaner{{Broker: 1, DirtyRatio: 0.5, FirstDirtyOffset: 10},
						{Broker: 2, DirtyRatio: 0.125, FirstDirtyOffset: 80, LastCleanedMillis: 1796148000000, Passes: 3, BytesReclaimed: 1536}}},
			}}},
			table: "TOPIC  PARTITION  LEADER  REPLICAS  ISR  OFFLINE  LOG-START  HIGH-WATERMARK  CLEANER\n" +
				"t      0          2       1,2       1,2  -        0          90              dirty 12%, 3 passes, 1.5KiB freed, last 2026-12-01T18:00:00Z\n",
			jsonShape: `[{"topic":"t","id":"AAAA","internal":false,"partitions":[` +
				`{"partition":0,"leader":2,"leader_epoch":0,"replicas":[1,2],"isr":[1,2],"offline_replicas":[],"log_start_offset":0,"high_watermark":90,"cleaner":[` +
				`{"broker":1,"dirty_ratio":0.5,"first_dirty_offset":10,"last_cleaned_ms":0,"passes":0,"bytes_reclaimed":0},` +
				`{"broker":2,"dirty_ratio":0.125,"first_dirty_offset":80,"last_cleaned_ms":1796148000000,"passes":3,"bytes_reclaimed":1536}]}]}]`,
		},
		{
			name: "topic results",
			r: TopicResults{
				{Topic: "a", Result: ResultCreated, Partitions: 3, ReplicationFactor: 1, Set: map[string]string{"z": "1", "a": "2"}},
				{Topic: "b", Result: ResultFailed, Error: "TOPIC_ALREADY_EXISTS: x"},
				{Topic: "c", Result: ResultAltered, Deleted: []string{"k"}},
			},
			table: "TOPIC  RESULT   DETAIL\n" +
				"a      created  partitions=3 replication-factor=1 a=2 z=1\n" +
				"b      failed   -\n" +
				"c      altered  -k\n",
			jsonShape: `[{"topic":"a","result":"created","partitions":3,"replication_factor":1,"set":{"a":"2","z":"1"}},` +
				`{"topic":"b","result":"failed","error":"TOPIC_ALREADY_EXISTS: x"},{"topic":"c","result":"altered","deleted":["k"]}]`,
		},
		{
			name: "config get",
			r: &ConfigDescription{Resource: ResourceTopic, Name: "t", Configs: []ConfigEntry{
				{Name: "a", Value: str("1"), Source: "DEFAULT_CONFIG", Doc: "What a is."},
				{Name: "password", Source: "STATIC_BROKER_CONFIG", Sensitive: true},
				{Name: "unset", Source: "DEFAULT_CONFIG"},
			}},
			table: "NAME      VALUE        SOURCE\n" +
				"a         1            DEFAULT_CONFIG\n" +
				"password  (sensitive)  STATIC_BROKER_CONFIG\n" +
				"unset     -            DEFAULT_CONFIG\n",
			jsonShape: `{"resource":"topic","name":"t","configs":[{"name":"a","value":"1","source":"DEFAULT_CONFIG","sensitive":false,"doc":"What a is."},` +
				`{"name":"password","value":null,"source":"STATIC_BROKER_CONFIG","sensitive":true,"doc":""},{"name":"unset","value":null,"source":"DEFAULT_CONFIG","sensitive":false,"doc":""}]}`,
		},
		{
			name: "config get --docs",
			r: &ConfigDescription{Resource: ResourceTopic, Name: "t", Configs: []ConfigEntry{
				{Name: "a", Value: str("1"), Source: "DEFAULT_CONFIG", Doc: "What a is."},
				{Name: "b", Value: str("2"), Source: "DEFAULT_CONFIG"},
			}, showDocs: true},
			table: "NAME  VALUE  SOURCE          DOC\n" +
				"a     1      DEFAULT_CONFIG  What a is.\n" +
				"b     2      DEFAULT_CONFIG  -\n",
			jsonShape: `{"resource":"topic","name":"t","configs":[{"name":"a","value":"1","source":"DEFAULT_CONFIG","sensitive":false,"doc":"What a is."},` +
				`{"name":"b","value":"2","source":"DEFAULT_CONFIG","sensitive":false,"doc":""}]}`,
		},
		{
			name: "config set",
			r:    &ConfigChange{Resource: ResourceBroker, Name: "default", Set: map[string]string{"b": "2", "a": "1"}, Deleted: []string{"c"}},
			table: "NAME  ACTION   VALUE\n" +
				"a     set      1\n" +
				"b     set      2\n" +
				"c     deleted  -\n",
			jsonShape: `{"resource":"broker","name":"default","set":{"a":"1","b":"2"},"deleted":["c"]}`,
		},
		{
			name: "records delete",
			r:    DeletedRecordsList{{Topic: "r", Partition: 0, LogStartOffset: 3}, {Topic: "r", Partition: 1, LogStartOffset: -1, Error: "OFFSET_OUT_OF_RANGE: x"}},
			table: "TOPIC  PARTITION  LOG-START\n" +
				"r      0          3\n" +
				"r      1          ?\n",
			jsonShape: `[{"topic":"r","partition":0,"log_start_offset":3},{"topic":"r","partition":1,"log_start_offset":-1,"error":"OFFSET_OUT_OF_RANGE: x"}]`,
		},
		{
			name: "cluster",
			r: &ClusterDescription{ClusterID: "abc", Controller: 1, Brokers: []BrokerDescription{
				{ID: 1, Host: "h", Port: 9092, Controller: true, State: BrokerAlive, PartitionsLed: 3, Version: "mq v0.4.0", Software: &kafkaext.Software{Name: "mq", Version: "v0.4.0"}, KafkaProtocol: "3.7", APIs: []APIVersion{{Key: 18, Name: "ApiVersions", Min: 0, Max: 4}},
					LogDirs: []LogDirDescription{{Path: "/d", TotalBytes: 2048, UsableBytes: 1024}}},
				{ID: 2, Host: "h2", Port: 9093, Rack: str("r1"), State: BrokerFenced, Version: "unknown", APIs: []APIVersion{}, LogDirs: []LogDirDescription{}},
			}, Quorum: &QuorumDescription{Leader: 1, Epoch: 4, HighWatermark: 120, Members: []QuorumMember{
				{ID: 1, Voter: true, LogEndOffset: 120, Lag: 0, LastFetchMillis: -1, LastCaughtUpMillis: -1},
				{ID: 2, Voter: true, LogEndOffset: 100, Lag: 20, LastFetchMillis: 98_800, LastCaughtUpMillis: 90_000},
				{ID: 3, LogEndOffset: -1, Lag: -1, LastFetchMillis: -1, LastCaughtUpMillis: -1},
			}}, showAPIs: true, now: time.UnixMilli(100_000)},
			table: "CLUSTER-ID  abc\n" +
				"CONTROLLER  1\n" +
				"\n" +
				"BROKER  HOST  PORT  RACK  STATE   LEADS  CONTROLLER  VERSION    PROTOCOL\n" +
				"1       h     9092  -     alive   3      yes         mq v0.4.0  Kafka 3.7\n" +
				"2       h2    9093  r1    fenced  0      no          unknown    unknown\n" +
				"\n" +
				"QUORUM-LEADER  1\n" +
				"QUORUM-EPOCH   4\n" +
				"\n" +
				"NODE  ROLE       LOG-END  LAG  LAST-FETCH\n" +
				"1     leader     120      0    -\n" +
				"2     voter      100      20   1s ago\n" +
				"3     non-voter  ?        ?    -\n" +
				"\n" +
				"BROKER  LOG-DIR  USABLE  TOTAL   STATE\n" +
				"1       /d       1.0KiB  2.0KiB  ok\n" +
				"\n" +
				"BROKER  KEY  API          MIN  MAX\n" +
				"1       18   ApiVersions  0    4\n",
			jsonShape: `{"cluster_id":"abc","controller":1,"brokers":[` +
				`{"id":1,"host":"h","port":9092,"rack":null,"controller":true,"state":"alive","partitions_led":3,"version":"mq v0.4.0","software":{"name":"mq","version":"v0.4.0"},"kafka_protocol":"3.7","apis":[{"key":18,"name":"ApiVersions","min":0,"max":4}],` +
				`"log_dirs":[{"path":"/d","total_bytes":2048,"usable_bytes":1024,"failing":false,"storage_errors":0,"damaged_ranges":0}]},` +
				`{"id":2,"host":"h2","port":9093,"rack":"r1","controller":false,"state":"fenced","partitions_led":0,"version":"unknown","software":null,"kafka_protocol":"","apis":[],"log_dirs":[]}],` +
				`"quorum":{"leader":1,"epoch":4,"high_watermark":120,"members":[` +
				`{"id":1,"voter":true,"log_end_offset":120,"lag":0,"last_fetch_ms":-1,"last_caught_up_ms":-1},` +
				`{"id":2,"voter":true,"log_end_offset":100,"lag":20,"last_fetch_ms":98800,"last_caught_up_ms":90000},` +
				`{"id":3,"voter":false,"log_end_offset":-1,"lag":-1,"last_fetch_ms":-1,"last_caught_up_ms":-1}]}}`,
		},
		{
			name: "cluster, quorum unavailable",
			r: &ClusterDescription{ClusterID: "abc", Controller: -1, Brokers: []BrokerDescription{
				{ID: 1, Host: "h", Port: 9092, State: BrokerShuttingDown, Version: "unknown", APIs: []APIVersion{}, LogDirs: []LogDirDescription{}},
			}, QuorumError: "unavailable"},
			table: "CLUSTER-ID  abc\n" +
				"CONTROLLER  none\n" +
				"\n" +
				"BROKER  HOST  PORT  RACK  STATE          LEADS  CONTROLLER  VERSION  PROTOCOL\n" +
				"1       h     9092  -     shutting down  0      no          unknown  unknown\n" +
				"\n" +
				"quorum: unavailable\n",
			jsonShape: `{"cluster_id":"abc","controller":-1,"brokers":[` +
				`{"id":1,"host":"h","port":9092,"rack":null,"controller":false,"state":"shutting down","partitions_led":0,"version":"unknown","software":null,"kafka_protocol":"","apis":[],"log_dirs":[]}],` +
				`"quorum":null,"quorum_error":"unavailable"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var table, js bytes.Buffer
			if err := Write(&table, client.FormatTable, tc.r); err != nil {
				t.Fatal(err)
			}
			if err := Write(&js, client.FormatJSON, tc.r); err != nil {
				t.Fatal(err)
			}
			if table.String() != tc.table {
				t.Errorf("table:\n%s\nwant:\n%s", table.String(), tc.table)
			}
			if js.String() != tc.jsonShape+"\n" {
				t.Errorf("json:\n%s\nwant:\n%s", js.String(), tc.jsonShape)
			}
		})
	}
}

// TestPartialPrintsOnlyWhatSucceeded: with an error, a result is printed
// only when something in it did not fail.
func TestPartialPrintsOnlyWhatSucceeded(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Result
		want bool
	}{
		{"nil descriptions", TopicDescriptions(nil), false},
		{"no descriptions", TopicDescriptions{}, false},
		{"one description", TopicDescriptions{{Topic: "a"}}, true},
		{"every topic failed", TopicResults{{Topic: "a", Result: ResultFailed}, {Topic: "b", Result: ResultFailed}}, false},
		{"one topic created", TopicResults{{Topic: "a", Result: ResultFailed}, {Topic: "b", Result: ResultCreated}}, true},
		{"every group failed", GroupResults{{Group: "g", Result: ResultFailed}}, false},
		{"a group missing", GroupResults{{Group: "g", Result: ResultMissing}}, true},
		{"every partition failed", DeletedRecordsList{{Topic: "t", Error: "x"}}, false},
		{"a partition deleted", DeletedRecordsList{{Topic: "t", Error: "x"}, {Topic: "t", Partition: 1}}, true},
		{"every range failed", SkippedRanges{{Topic: "t", Error: "x"}}, false},
		{"no groups", GroupDescriptions{}, false},
		{"a plan", &ResetPlan{Group: "g"}, true},
		{"no plan", (*ResetPlan)(nil), false},
	} {
		if got := Partial(tc.r); got != tc.want {
			t.Errorf("%s: Partial = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTopicIDIsURLSafeBase64WithoutPadding: topic IDs read as Kafka's
// tools and mqd's logs write them, and as the cluster id is written.
func TestTopicIDIsURLSafeBase64WithoutPadding(t *testing.T) {
	id := [16]byte{0xfb, 0xff, 0xbf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0xff}
	if got, want := TopicIDString(id), "-_-_AQIDBAUGBwgJCgsM_w"; got != want {
		t.Errorf("TopicIDString = %q, want %q", got, want)
	}
}
