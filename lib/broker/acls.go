package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/server"
)

// The ACL APIs (KIP-140, prefixed patterns KIP-290): the bindings live in
// the controller's image (controller.AlterACLs); a broker describes them
// from its image and forwards creations and deletions to the controller.
// Who may call them is authorize.go's: DESCRIBE on the cluster to
// describe, ALTER to create or delete.

// aclAPIs lists the ACL APIs and the versions implemented. Version 0
// knows only LITERAL patterns.
func (b *Broker) aclAPIs() map[int16]api {
	return map[int16]api{
		kmsg.DescribeACLs.Int16(): {0, 3, b.handleDescribeACLs},
		kmsg.CreateACLs.Int16():   {0, 3, b.handleCreateACLs},
		kmsg.DeleteACLs.Int16():   {0, 3, b.handleDeleteACLs},
	}
}

// patternOf is the pattern type a request of version gives: version 0
// has none and means LITERAL.
func patternOf(version int16, p kmsg.ACLResourcePatternType) kmsg.ACLResourcePatternType {
	if version == 0 {
		return kmsg.ACLResourcePatternTypeLiteral
	}
	return p
}

func (b *Broker) handleDescribeACLs(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := auth.Filter{
		ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: patternOf(req.Version, r.ResourcePatternType),
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kafkaError(err)
		return reply(resp)
	}
	// Bindings come sorted by resource: one response resource per run.
	for _, bd := range b.ctrl.Image().ACLs.Describe(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != bd.ResourceType || resp.Resources[n-1].ResourceName != bd.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != bd.PatternType {
			rs := kmsg.NewDescribeACLsResponseResource()
			rs.ResourceType, rs.ResourceName, rs.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
			resp.Resources = append(resp.Resources, rs)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return reply(resp)
}

func (b *Broker) handleCreateACLs(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	var create []auth.Binding
	var at []int // the result index of each of create
	for i, c := range r.Creations {
		resp.Results[i].Default()
		bd := auth.Binding{
			ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: patternOf(req.Version, c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
		}
		if err := bd.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kafkaError(err)
			continue
		}
		create, at = append(create, bd), append(at, i)
	}
	if len(create) == 0 {
		return reply(resp)
	}
	return func() server.Response {
		ctx, cancel := withTimeout(ctx, 0)
		defer cancel()
		if err := b.ctrl.AlterACLs(ctx, create, nil); err != nil {
			code, msg := kafkaError(err)
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
		} else {
			b.log.Info("ACLs created", "bindings", fmt.Sprint(create))
		}
		return server.Response{Msg: resp}
	}
}

func (b *Broker) handleDeleteACLs(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	var filters []auth.Filter
	var at []int
	for i, fl := range r.Filters {
		resp.Results[i].Default()
		f := auth.Filter{
			ResourceType: fl.ResourceType, ResourceName: fl.ResourceName, PatternType: patternOf(req.Version, fl.ResourcePatternType),
			Principal: fl.Principal, Host: fl.Host, Operation: fl.Operation, Permission: fl.PermissionType,
		}
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kafkaError(err)
			continue
		}
		filters, at = append(filters, f), append(at, i)
	}
	if len(filters) == 0 {
		return reply(resp)
	}
	return func() server.Response {
		ctx, cancel := withTimeout(ctx, 0)
		defer cancel()
		// The answer lists what the filters select in this node's image,
		// which the controller's may be a little ahead of; the deletion
		// itself is by the filters, on the controller's.
		_, matched := b.ctrl.Image().ACLs.Delete(filters)
		if err := b.ctrl.AlterACLs(ctx, nil, filters); err != nil {
			code, msg := kafkaError(err)
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
			return server.Response{Msg: resp}
		}
		for k, i := range at {
			for _, bd := range matched[k] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
			if len(matched[k]) > 0 {
				b.log.Info("ACLs deleted", "bindings", fmt.Sprint(matched[k]))
			}
		}
		return server.Response{Msg: resp}
	}
}
