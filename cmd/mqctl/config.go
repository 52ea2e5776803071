package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "read and change topic, broker and group configs",
		Subcommands: []*cli.Command{
			{
				Name:      "get",
				Usage:     "show the configs of a topic, a broker or a group",
				ArgsUsage: "topic TOPIC [NAME...] | broker [ID|default] [NAME...] | group GROUP [NAME...]",
				UsageText: doc("mqctl config get topic TOPIC [NAME...] [--docs]\nmqctl config get broker [ID|default] [NAME...] [--docs]\nmqctl config get group GROUP [NAME...] [--docs]", `Shows every config of the topic, broker or group, or only the NAMEs
given, with its value and where the value comes from (DEFAULT_CONFIG,
STATIC_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, GROUP_CONFIG). "broker" alone is the only
broker of a one-node cluster; "broker default" the cluster-wide broker
defaults. A group's configs are a share group's (mqctl queue config
shows the same).

Prints NAME VALUE SOURCE, and with --docs DOC: what the config means, as
the broker documents it (mqd --help-config lists mqd's with their
defaults and valid values). JSON: {"resource": "topic"|"broker"|"group",
 "name": string, "configs": [{"name": string, "value": string|null,
 "source": string, "sensitive": bool, "doc": string}]}, sorted by name;
name is the topic, the broker id, "default" or the group; value is null for
sensitive configs; doc is "" when the broker documents none. An unknown
topic or NAME is a failure (exit 1).`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "docs", Usage: "add a DOC column: what each config means"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					target, names, err := admin.ParseConfigTarget("config get", c.Args().Slice())
					if err != nil {
						return nil, err
					}
					docs := c.Bool("docs")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.GetConfigs(ctx, target, names, docs)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "set",
				Usage:     "change configs of a topic, a broker or a group",
				ArgsUsage: "topic TOPIC [KEY=VALUE...] | broker [ID|default] [KEY=VALUE...] | group GROUP [KEY=VALUE...]",
				UsageText: doc("mqctl config set topic TOPIC [KEY=VALUE...] [-d KEY]...\nmqctl config set broker [ID|default] [KEY=VALUE...] [-d KEY]...\nmqctl config set group GROUP [KEY=VALUE...] [-d KEY]...", `Sets each KEY to VALUE and resets each --delete KEY to its default, leaving
the other configs as they are (incremental). "broker" without an id, or
"broker default", changes the cluster-wide defaults every broker inherits;
"broker ID" changes that broker only. Broker configs that can only be set
when mqd starts are refused. "group GROUP" changes a share group's
configs (share.auto.offset.reset, share.record.lock.duration.ms,
share.delivery.count.limit, errors.deadletterqueue.topic.name, ...;
mqctl queue config GROUP lists them), also before the group exists.

Prints NAME ACTION VALUE. JSON: {"resource": "topic"|"broker"|"group",
 "name": string, "set": {name: value}, "deleted": [name]}. An unknown topic
or config, or a bad value, is a failure (exit 1).`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "delete", Aliases: []string{"d"}, Usage: "reset config `KEY` to its default (repeatable)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					target, kvs, err := admin.ParseConfigTarget("config set", c.Args().Slice())
					if err != nil {
						return nil, err
					}
					set, err := admin.ParseConfigs("config set", kvs)
					if err != nil {
						return nil, err
					}
					deleted := c.StringSlice("delete")
					if err := admin.CheckConfigChange("config set", set, deleted); err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.SetConfigs(ctx, target, set, deleted)
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
