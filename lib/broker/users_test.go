package broker

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
)

func TestScramCredentialsAreCreatedDescribedAndDeletedWithKadm(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	adm := kadm.NewClient(newClient(t, addr))
	ctx := ctxTimeout(t, 30*time.Second)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "s3cret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "s3cret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "hunter2"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("create: %v, %v", err, altered.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v, %v", err, described.Error())
	}
	if len(described) != 2 || len(described["alice"].CredInfos) != 2 || len(described["bob"].CredInfos) != 1 {
		t.Fatalf("described %+v, want alice with 2 credentials and bob with 1", described)
	}
	for _, ci := range described["alice"].CredInfos {
		if want := map[kadm.ScramMechanism]int32{kadm.ScramSha256: 4096, kadm.ScramSha512: 8192}[ci.Mechanism]; ci.Iterations != want {
			t.Errorf("alice %v: %d iterations, want %d", ci.Mechanism, ci.Iterations, want)
		}
	}

	// The stored keys are the password's: a SCRAM login with it works
	// against what the image holds.
	img := tb.ctrl.Image()
	s, err := auth.NewSession(auth.Plain, img.ScramCredential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step([]byte("\x00bob\x00hunter2")); err != nil || s.User() != "bob" {
		t.Fatalf("PLAIN login as bob against the image: %q, %v", s.User(), err)
	}

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("delete: %v, %v", err, altered.Error())
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "alice", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if a := described["alice"]; a.Err != nil || len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("alice after the delete: %+v", a)
	}
	if n := described["nobody"]; n.Err != kerr.ResourceNotFound {
		t.Fatalf("describe of an unknown user: %v, want RESOURCE_NOT_FOUND", n.Err)
	}
}

func TestAlterUserScramCredentialsRefusesWithKafkasCodes(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	cl := newClient(t, addr)
	ctx := ctxTimeout(t, 30*time.Second)

	salt := []byte("0123456789abcdef")
	salted, _ := pbkdf2.Key(sha256.New, "pw", salt, 4096, 32)
	up := func(user string, mech int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iterations, salt, salted
		return u
	}
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ghost", 1), del("dup", 1)}
	noSalt := up("nosalt", 1, 4096)
	noSalt.Salt = nil
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("ok", 1, 4096), up("few", 1, 4095), up("many", 2, 16385), up("sha1", 3, 4096),
		up("", 1, 4096), up("dup", 1, 4096), noSalt, up("uid:0", 1, 4096),
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{
		"ghost": kerr.ResourceNotFound, "dup": kerr.DuplicateResource, "ok": nil,
		"few": kerr.UnacceptableCredential, "many": kerr.UnacceptableCredential,
		"sha1": kerr.UnsupportedSaslMechanism, "": kerr.UnacceptableCredential, "nosalt": kerr.UnacceptableCredential,
		"uid:0": kerr.UnacceptableCredential, // User:uid:N is a Unix socket peer's principal
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		wantCode := int16(0)
		if w := want[r.User]; w != nil {
			wantCode = w.Code
		}
		if r.ErrorCode != wantCode {
			t.Errorf("user %q: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), want[r.User])
		}
		if r.ErrorCode != 0 && (r.ErrorMessage == nil || *r.ErrorMessage == "") {
			t.Errorf("user %q refused without a message", r.User)
		}
	}
	if users := tb.ctrl.Image().ScramUsers(); len(users) != 1 || users[0] != "ok" {
		t.Fatalf("users after the request: %v, want only ok", users)
	}

	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, name := range []string{"ok", "ok", "ghost"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = name
		dreq.Users = append(dreq.Users, u)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe ok twice and ghost: %+v", dresp.Results)
	}
}
