package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
)

// aclFlags are the flags of acl add, remove and list (kafka-acls'). The
// repeatable ones keep their values whole: a certificate's principal
// holds commas (User:CN=alice,O=example).
func aclFlags() []cli.Flag {
	return append(commandFlags(),
		&cli.GenericFlag{Value: &listValue{}, Name: "allow", Usage: "allow `PRINCIPAL` (User:NAME; repeatable)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "deny", Usage: "deny `PRINCIPAL` (repeatable)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "host", Usage: "from `HOST` only, an IP address (repeatable; add: default * for every host)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "operation", Usage: "`OP`: read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write or all (repeatable)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "topic", Usage: "on topic `NAME` (repeatable)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "group", Usage: "on group `NAME` (repeatable)"},
		&cli.GenericFlag{Value: &listValue{}, Name: "transactional-id", Usage: "on transactional id `ID` (repeatable)"},
		&cli.BoolFlag{Name: "cluster", Usage: "on the cluster"},
		&cli.StringFlag{Name: "resource-pattern-type", Usage: "`TYPE` of the resource names: literal (\"*\" is every name) or prefixed; list and remove take any and match too"},
	)
}

func aclSpec(c *cli.Context) admin.ACLSpec {
	return admin.ACLSpec{
		Allow: listFlag(c, "allow"), Deny: listFlag(c, "deny"), Hosts: listFlag(c, "host"), Operations: listFlag(c, "operation"),
		Topics: listFlag(c, "topic"), Groups: listFlag(c, "group"), TransactionalIDs: listFlag(c, "transactional-id"),
		Cluster: c.Bool("cluster"), Pattern: c.String("resource-pattern-type"),
	}
}

// aclAction is the action of one acl command: the spec checked before
// connecting, then run.
func aclAction(what string, run func(*admin.Admin, context.Context, admin.ACLSpec) (admin.ACLs, error)) cli.ActionFunc {
	return action(func(c *cli.Context) (job, error) {
		if err := noArgs(c); err != nil {
			return nil, err
		}
		s := aclSpec(c)
		if err := admin.ParseACLSpec(what, s); err != nil {
			return nil, err
		}
		return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
			r, err := run(a, ctx, s)
			if r == nil {
				return nil, err
			}
			return r, err
		}, nil
	})
}

func aclCommand() *cli.Command {
	const shape = `JSON: an array of {"resource_type": "topic"|"group"|"cluster"|
"transactional-id"|"delegation-token", "resource_name": string,
"pattern_type": "literal"|"prefixed", "principal": string, "host": string,
"operation": string, "permission": "allow"|"deny"}, sorted.`
	return &cli.Command{
		Name:  "acl",
		Usage: "add, remove and list the ACLs: who may do what",
		Subcommands: []*cli.Command{
			{
				Name:  "add",
				Usage: "allow or deny principals operations on resources",
				UsageText: doc("mqctl acl add (--allow|--deny) PRINCIPAL --operation OP (--topic NAME|--group NAME|--transactional-id ID|--cluster) [--host HOST] [--resource-pattern-type literal|prefixed]",
					`Creates one ACL for every resource, principal, host and operation given,
as kafka-acls --add does, and prints them: RESOURCE NAME PATTERN PRINCIPAL
HOST OPERATION PERMISSION. A principal is User:NAME: the user of a SASL
login, User:CN=...,O=... for a TLS client certificate, User:uid:N for a
Unix socket peer of uid N. --host is a client's IP address (default *,
every host). The resource name "*" with the literal pattern type is every
resource of its type; --resource-pattern-type prefixed makes each name a
prefix. A DENY wins over any ALLOW. Creating ACLs needs ALTER on the
cluster: a super user (super.users; root and mqd's own user on the Unix
socket) creates the first ones.

`+shape),
				Flags:  aclFlags(),
				Action: aclAction("acl add", (*admin.Admin).AddACLs),
			},
			{
				Name:  "remove",
				Usage: "remove the ACLs the flags select",
				UsageText: doc("mqctl acl remove (--topic NAME|--group NAME|--transactional-id ID|--cluster) [--allow|--deny PRINCIPAL] [--operation OP] [--host HOST] [--resource-pattern-type literal|prefixed|any|match]",
					`Removes the ACLs of the resources given, as kafka-acls --remove does,
and prints those removed. What is not given matches anything: without
--allow or --deny every principal's, without --operation every
operation's, without --host every host's. The pattern type is literal
unless given: any selects literal and prefixed ACLs of the names given,
match those that apply to the named resource (its literal ACLs, the
literal "*" and the prefixes of its name).

`+shape),
				Flags:  aclFlags(),
				Action: aclAction("acl remove", (*admin.Admin).RemoveACLs),
			},
			{
				Name:  "list",
				Usage: "list the ACLs, or those the flags select",
				UsageText: doc("mqctl acl list [--topic NAME|--group NAME|--transactional-id ID|--cluster] [--allow|--deny PRINCIPAL] [--operation OP] [--host HOST] [--resource-pattern-type literal|prefixed|any|match]",
					`Lists the ACLs: all of them, or those the flags select as for acl
remove, except that without a resource every resource's are listed, and
the pattern type is any unless given (--resource-pattern-type match
--topic orders lists every ACL that applies to the topic orders).

`+shape),
				Flags:  aclFlags(),
				Action: aclAction("acl list", (*admin.Admin).ListACLs),
			},
		},
	}
}
