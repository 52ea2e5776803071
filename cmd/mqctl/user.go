package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "create, delete and list the users SASL authenticates",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "set a user's SCRAM password, creating the user",
				ArgsUsage: "NAME",
				UsageText: doc("mqctl user create NAME --mechanism SCRAM-SHA-256|SCRAM-SHA-512 --password-file FILE [--iterations N]", `Sets the password of user NAME for one SCRAM mechanism
(AlterUserScramCredentials), creating the user or replacing that
mechanism's password. The password is the first line of FILE ("-":
standard input), never an argument: arguments are visible in ps. mqctl
salts it (PBKDF2, a random salt, N iterations, 4096 to 16384, default
8192) and the brokers keep only keys derived from it. A user logs in
with PLAIN against either credential. Create the first user through
mqd's Unix socket, which needs no login.

Prints USER MECHANISM RESULT. JSON: an array of {"user": string,
"mechanism": string, "result": "created"|"failed", "error": string}.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "mechanism", Usage: "the SCRAM `MECHANISM`: SCRAM-SHA-256 or SCRAM-SHA-512"},
					&cli.StringFlag{Name: "password-file", Usage: "read the new password from the first line of `FILE` (- for standard input)"},
					&cli.IntFlag{Name: "iterations", Value: admin.DefaultScramIterations, Usage: "PBKDF2 iterations, `N` from 4096 to 16384"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() != 1 {
						return nil, client.Usagef("user create: want one user NAME")
					}
					name, mech := c.Args().First(), c.String("mechanism")
					if mech == "" {
						return nil, client.Usagef("user create: --mechanism is required (SCRAM-SHA-256 or SCRAM-SHA-512)")
					}
					if err := admin.CheckUserCreate(name, mech, int32(c.Int("iterations"))); err != nil {
						return nil, err
					}
					password, err := newPassword(c.String("password-file"), c.App.Reader)
					if err != nil {
						return nil, err
					}
					iterations := int32(c.Int("iterations"))
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.CreateUser(ctx, name, mech, password, iterations)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "delete",
				Aliases:   []string{"rm"},
				Usage:     "delete a user's SCRAM credentials",
				ArgsUsage: "NAME",
				UsageText: doc("mqctl user delete NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]", `Deletes user NAME's credential for the mechanism, or all its
credentials. A user without any is a failure (exit 1). Connections
already authenticated stay open.

Prints USER MECHANISM RESULT. JSON: an array of {"user": string,
"mechanism": string, "result": "deleted"|"failed", "error": string}.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "mechanism", Usage: "delete only the credential of `MECHANISM`"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() != 1 || c.Args().First() == "" {
						return nil, client.Usagef("user delete: want one user NAME")
					}
					name, mech := c.Args().First(), c.String("mechanism")
					if mech != "" {
						if err := admin.CheckUserCreate(name, mech, admin.DefaultScramIterations); err != nil {
							return nil, err
						}
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DeleteUser(ctx, name, mech)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:    "list",
				Aliases: []string{"ls"},
				Usage:   "list the users and their SCRAM mechanisms",
				UsageText: doc("mqctl user list", `Lists the users with SCRAM credentials (DescribeUserScramCredentials):
USER MECHANISM ITERATIONS, one row per credential. Neither salts nor
keys are ever shown.

JSON: an array of {"name": string, "credentials": [{"mechanism": string,
"iterations": int}]}, sorted by name.`),
				Flags: commandFlags(),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.ListUsers(ctx)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
		},
	}
}

// newPassword reads user create's password: the first line of file, or
// of stdin for "-".
func newPassword(file string, stdin io.Reader) (string, error) {
	switch file {
	case "":
		return "", client.Usagef("user create: --password-file FILE is required (- for standard input)")
	case "-":
		data, err := io.ReadAll(io.LimitReader(stdin, 1<<16))
		if err != nil {
			return "", client.Usagef("user create: read the password from standard input: %v", err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return "", client.Usagef("user create: the password on standard input is empty")
		}
		return line, nil
	}
	if _, err := os.Stat(file); err != nil {
		return "", client.Usagef("user create: --password-file: %v", err)
	}
	p, err := client.ReadPasswordFile(file)
	if err != nil {
		return "", client.Usagef("user create: --password-file %s: the first line is empty", file)
	}
	return p, nil
}
