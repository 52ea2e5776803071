package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// Users: the SCRAM credentials SASL checks (lib/auth), kept in the
// controller image (Image.ScramCredentials) and managed with
// DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

// scramMechanisms maps the mechanism numbers of KIP-554 to their names.
var scramMechanisms = map[int8]string{1: auth.ScramSHA256, 2: auth.ScramSHA512}

func scramMechanismNumber(name string) int8 {
	for n, m := range scramMechanisms {
		if m == name {
			return n
		}
	}
	return 0
}

// handleDescribeUserScramCredentials answers DescribeUserScramCredentials
// (key 50): each user's mechanisms and iteration counts, never a salt or
// a key. No users (null or empty) means every user; a named user without
// credentials is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
func (b *Broker) handleDescribeUserScramCredentials(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := b.ctrl.Image()
	describe := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		for _, m := range auth.ScramMechanisms {
			if c, ok := img.ScramCredential(user, m); ok {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramMechanismNumber(m), int32(c.Iterations)
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		return res
	}
	if len(r.Users) == 0 {
		for _, user := range img.ScramUsers() {
			resp.Results = append(resp.Results, describe(user))
		}
		return reply(resp)
	}
	count := map[string]int{}
	for _, u := range r.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range r.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		res := describe(u.Name)
		switch {
		case count[u.Name] > 1:
			res = kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u.Name
			res.ErrorCode, res.ErrorMessage = kafkaError(refuse(kerr.DuplicateResource, "user %q is named more than once", u.Name))
		case len(res.CredentialInfos) == 0:
			res.ErrorCode, res.ErrorMessage = kafkaError(refuse(kerr.ResourceNotFound, "user %q has no SCRAM credential", u.Name))
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}

// handleAlterUserScramCredentials answers AlterUserScramCredentials (key
// 51). Clients send the salted password (they run PBKDF2); the broker
// keeps only the StoredKey and ServerKey derived from it. Each user is
// answered once, in the order of the request (deletions, then
// upsertions), and a user one of whose changes is refused changes
// nothing: a user and mechanism named twice is DUPLICATE_RESOURCE, an
// empty user or one starting with "uid:" (User:uid:N is a Unix socket
// peer's principal), iterations outside 4096 to 16384 or an empty salt or
// password UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256
// and SCRAM-SHA-512 UNSUPPORTED_SASL_MECHANISM, and deleting a
// credential that does not exist RESOURCE_NOT_FOUND. The other users'
// changes are committed together, in one controller command.
func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	img := b.ctrl.Image()

	var users []string
	errs := map[string]error{}
	changes := map[string][]controller.ScramCredentialChange{}
	named := map[[2]string]int{}
	for _, d := range r.Deletions {
		named[[2]string{d.Name, scramMechanisms[d.Mechanism]}]++
	}
	for _, u := range r.Upsertions {
		named[[2]string{u.Name, scramMechanisms[u.Mechanism]}]++
	}
	note := func(user string, mechanism int8) (string, bool) {
		if _, ok := errs[user]; !ok {
			users = append(users, user)
			errs[user] = nil
		}
		name, known := scramMechanisms[mechanism]
		key := [2]string{user, name}
		nameErr := auth.CheckUserName(user)
		switch {
		case errs[user] != nil:
			return "", false
		case nameErr != nil:
			errs[user] = nameErr
		case !known:
			errs[user] = refuse(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", mechanism)
		case named[key] > 1:
			errs[user] = refuse(kerr.DuplicateResource, "user %q and mechanism %s are named more than once", user, name)
		}
		return name, errs[user] == nil
	}
	for _, d := range r.Deletions {
		m, ok := note(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := img.ScramCredential(d.Name, m); !exists {
			errs[d.Name] = refuse(kerr.ResourceNotFound, "user %q has no %s credential", d.Name, m)
			continue
		}
		changes[d.Name] = append(changes[d.Name], controller.ScramCredentialChange{User: d.Name, Mechanism: m, Delete: true})
	}
	for _, u := range r.Upsertions {
		m, ok := note(u.Name, u.Mechanism)
		if !ok {
			continue
		}
		cred, err := auth.CredentialFromSaltedPassword(m, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			errs[u.Name] = refuse(kerr.UnacceptableCredential, "user %q, %s: %v", u.Name, m, err)
			continue
		}
		changes[u.Name] = append(changes[u.Name], controller.ScramCredentialChange{User: u.Name, Mechanism: m, Credential: cred})
	}
	var all []controller.ScramCredentialChange
	for _, user := range users {
		if errs[user] == nil {
			all = append(all, changes[user]...)
		}
	}
	if len(all) > 0 {
		ctx, cancel := withTimeout(ctx, 0)
		defer cancel()
		if err := b.ctrl.AlterScramCredentials(ctx, all); err != nil {
			for _, user := range users {
				if errs[user] == nil {
					errs[user] = err
				}
			}
		} else {
			b.log.Info("altered SCRAM credentials", "users", len(all))
		}
	}
	for _, user := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		res.ErrorCode, res.ErrorMessage = kafkaError(errs[user])
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
