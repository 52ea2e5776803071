package admin

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
)

// DefaultScramIterations is the iteration count of a credential user
// create makes unless told otherwise: twice Kafka's minimum (4096), well
// under its maximum (16384).
const DefaultScramIterations = 8192

// ScramMechanisms are the mechanisms a user's credential is for.
var ScramMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

// Users are the users with SCRAM credentials, by name (user list).
type Users []User

// User is one user and the mechanisms it has a credential for.
type User struct {
	Name        string           `json:"name"`
	Credentials []UserCredential `json:"credentials"`
}

// UserCredential is a credential's mechanism and iteration count; the
// broker never tells more (no salt, no key).
type UserCredential struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

// Table is one row per credential: USER MECHANISM ITERATIONS.
func (us Users) Table() ([]string, [][]string) {
	var rows [][]string
	for _, u := range us {
		for _, c := range u.Credentials {
			rows = append(rows, []string{u.Name, c.Mechanism, strconv.Itoa(int(c.Iterations))})
		}
	}
	return []string{"USER", "MECHANISM", "ITERATIONS"}, rows
}

// UserResults are what user create and delete did, one row per
// credential.
type UserResults []UserResult

// UserResult is what became of one credential: ResultCreated,
// ResultDeleted or ResultFailed with Error.
type UserResult struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
	Result    string `json:"result"`
	Error     string `json:"error,omitempty"`
}

// Table is USER MECHANISM RESULT, and ERROR when one failed.
func (rs UserResults) Table() ([]string, [][]string) {
	failed := false
	for _, r := range rs {
		failed = failed || r.Error != ""
	}
	header := []string{"USER", "MECHANISM", "RESULT"}
	if failed {
		header = append(header, "ERROR")
	}
	var rows [][]string
	for _, r := range rs {
		row := []string{r.User, r.Mechanism, r.Result}
		if failed {
			row = append(row, r.Error)
		}
		rows = append(rows, row)
	}
	return header, rows
}

// scramMechanism parses a mechanism name, any case.
func scramMechanism(name string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(name) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, client.Usagef("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", name)
}

// CheckUserCreate checks user create's arguments before anything is
// sent: a user name, a SCRAM mechanism, iterations from 4096 to 16384.
func CheckUserCreate(name, mechanism string, iterations int32) error {
	if name == "" {
		return client.Usagef("user create: the user name must not be empty")
	}
	if _, err := scramMechanism(mechanism); err != nil {
		return err
	}
	if iterations < 4096 || iterations > 16384 {
		return client.Usagef("user create: --iterations %d: want 4096 to 16384", iterations)
	}
	return nil
}

// ListUsers lists the users with SCRAM credentials, sorted by name.
func (a *Admin) ListUsers(ctx context.Context) (Users, error) {
	var described kadm.DescribedUserSCRAMs
	err := a.retry(ctx, func(ctx context.Context) error {
		var err error
		described, err = a.adm.DescribeUserSCRAMs(ctx)
		if err == nil {
			err = described.Error()
		}
		return err
	})
	if err != nil {
		return nil, client.Failf("user list: %v", err)
	}
	users := Users{}
	for _, d := range described.Sorted() {
		u := User{Name: d.User, Credentials: []UserCredential{}}
		for _, c := range d.CredInfos {
			u.Credentials = append(u.Credentials, UserCredential{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
		}
		users = append(users, u)
	}
	return users, nil
}

// CreateUser sets the password of user for a SCRAM mechanism (creating
// the user, or replacing its password for that mechanism). The client
// salts the password (kadm runs PBKDF2 with a random salt); the broker
// keeps only keys derived from it.
func (a *Admin) CreateUser(ctx context.Context, user, mechanism, password string, iterations int32) (UserResults, error) {
	if err := CheckUserCreate(user, mechanism, iterations); err != nil {
		return nil, err
	}
	m, _ := scramMechanism(mechanism)
	altered, err := a.adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: iterations, Password: password}})
	return userResults(altered, err, []credential{{user, m}}, ResultCreated)
}

type credential struct {
	user      string
	mechanism kadm.ScramMechanism
}

// DeleteUser deletes user's credential for mechanism, or every
// credential it has when mechanism is empty. A user without one is a
// failure.
func (a *Admin) DeleteUser(ctx context.Context, user, mechanism string) (UserResults, error) {
	var creds []credential
	if mechanism != "" {
		m, err := scramMechanism(mechanism)
		if err != nil {
			return nil, err
		}
		creds = append(creds, credential{user, m})
	} else {
		described, err := a.adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return nil, client.Failf("user delete %s: %v", user, err)
		}
		d := described[user]
		if errors.Is(d.Err, kerr.ResourceNotFound) {
			return nil, client.Failf("user delete %s: no such user", user)
		}
		if d.Err != nil {
			return nil, client.Failf("user delete %s: %v", user, d.Err)
		}
		for _, c := range d.CredInfos {
			creds = append(creds, credential{user, c.Mechanism})
		}
	}
	var del []kadm.DeleteSCRAM
	for _, c := range creds {
		del = append(del, kadm.DeleteSCRAM{User: c.user, Mechanism: c.mechanism})
	}
	altered, err := a.adm.AlterUserSCRAMs(ctx, del, nil)
	return userResults(altered, err, creds, ResultDeleted)
}

// userResults makes the results of one AlterUserScramCredentials, and
// the command's error when a credential failed.
func userResults(altered kadm.AlteredUserSCRAMs, err error, creds []credential, ok string) (UserResults, error) {
	if err != nil {
		return nil, client.Failf("%v", err)
	}
	var rs UserResults
	var failed error
	for _, c := range creds {
		r := UserResult{User: c.user, Mechanism: c.mechanism.String(), Result: ok}
		if e := altered[c.user]; e.Err != nil {
			r.Result, r.Error = ResultFailed, e.Err.Error()
			if e.ErrMessage != "" {
				r.Error = e.ErrMessage
			}
			failed = client.Failf("user %s, %s: %s", c.user, r.Mechanism, r.Error)
		}
		rs = append(rs, r)
	}
	return rs, failed
}
