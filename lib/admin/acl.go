package admin

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// ACLSpec is what mqctl acl add, remove and list are given, with
// kafka-acls' meaning. For add it names bindings: every resource with
// every principal (Allow, Deny), host and operation. For remove and list
// it names filters, where what is not given matches anything: no
// principal, every principal and permission; no host, every host; no
// operation, every operation; no resource (list only), every resource.
type ACLSpec struct {
	Allow, Deny      []string // principals, User:NAME
	Hosts            []string // add: default "*"
	Operations       []string // read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write, all
	Topics, Groups   []string
	TransactionalIDs []string
	Cluster          bool
	// Pattern is literal or prefixed for add; list and remove take any
	// and match too (the bindings that apply to the named resource).
	// Empty: literal for add and remove, any for list.
	Pattern string
}

// ACL is one binding, as acl list prints it.
type ACL struct {
	ResourceType string `json:"resource_type"` // topic, group, cluster, transactional-id, delegation-token
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"` // literal, prefixed
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"` // allow, deny
}

// ACLs is the result of acl add (what was created), remove (what was
// removed) and list, sorted.
type ACLs []ACL

// Table implements Result.
func (as ACLs) Table() ([]string, [][]string) {
	rows := make([][]string, len(as))
	for i, a := range as {
		rows[i] = []string{a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission}
	}
	return []string{"RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"}, rows
}

var aclOperations = map[string]kmsg.ACLOperation{
	"all": kmsg.ACLOperationAll, "read": kmsg.ACLOperationRead, "write": kmsg.ACLOperationWrite,
	"create": kmsg.ACLOperationCreate, "delete": kmsg.ACLOperationDelete, "alter": kmsg.ACLOperationAlter,
	"describe": kmsg.ACLOperationDescribe, "clusteraction": kmsg.ACLOperationClusterAction,
	"describeconfigs": kmsg.ACLOperationDescribeConfigs, "alterconfigs": kmsg.ACLOperationAlterConfigs,
	"idempotentwrite": kmsg.ACLOperationIdempotentWrite, "createtokens": kmsg.ACLOperationCreateTokens,
	"describetokens": kmsg.ACLOperationDescribeTokens,
}

// parseOperation reads an operation as kafka-acls writes it (Read,
// DescribeConfigs) or with dashes or underscores (describe-configs).
func parseOperation(s string) (kmsg.ACLOperation, bool) {
	op, ok := aclOperations[strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))]
	return op, ok
}

func operationName(op kmsg.ACLOperation) string {
	for name, o := range aclOperations {
		if o == op {
			switch name {
			case "clusteraction":
				return "cluster-action"
			case "describeconfigs":
				return "describe-configs"
			case "alterconfigs":
				return "alter-configs"
			case "idempotentwrite":
				return "idempotent-write"
			case "createtokens":
				return "create-tokens"
			case "describetokens":
				return "describe-tokens"
			}
			return name
		}
	}
	return strings.ToLower(op.String())
}

func resourceTypeName(t kmsg.ACLResourceType) string {
	switch t {
	case kmsg.ACLResourceTypeTransactionalId:
		return "transactional-id"
	case kmsg.ACLResourceTypeDelegationToken:
		return "delegation-token"
	}
	return strings.ToLower(t.String())
}

// aclResource is one resource of a spec; a nil name is any (filters).
type aclResource struct {
	typ  kmsg.ACLResourceType
	name *string
}

// principal is one principal of a spec with its permission; a nil name
// is any (filters).
type aclPrincipal struct {
	name *string
	perm kmsg.ACLPermissionType
}

// parse checks the spec for a command (add, remove, list) and expands its
// resources, principals, hosts and operations; a nil entry of hosts or
// ops is any.
func (s ACLSpec) parse(what string) (res []aclResource, prins []aclPrincipal, hosts []*string, ops []kmsg.ACLOperation, pat kmsg.ACLResourcePatternType, err error) {
	add := what == "acl add"
	switch strings.ToLower(s.Pattern) {
	case "", "literal":
		pat = kmsg.ACLResourcePatternTypeLiteral
		if s.Pattern == "" && what == "acl list" {
			pat = kmsg.ACLResourcePatternTypeAny
		}
	case "prefixed":
		pat = kmsg.ACLResourcePatternTypePrefixed
	case "any", "match":
		if add {
			return nil, nil, nil, nil, 0, client.Usagef("%s: --resource-pattern-type %s is for list and remove; want literal or prefixed", what, s.Pattern)
		}
		pat = kmsg.ACLResourcePatternTypeAny
		if strings.EqualFold(s.Pattern, "match") {
			pat = kmsg.ACLResourcePatternTypeMatch
		}
	default:
		return nil, nil, nil, nil, 0, client.Usagef("%s: --resource-pattern-type: want literal, prefixed, any or match, got %q", what, s.Pattern)
	}
	for _, t := range s.Topics {
		res = append(res, aclResource{kmsg.ACLResourceTypeTopic, &t})
	}
	for _, g := range s.Groups {
		res = append(res, aclResource{kmsg.ACLResourceTypeGroup, &g})
	}
	for _, x := range s.TransactionalIDs {
		res = append(res, aclResource{kmsg.ACLResourceTypeTransactionalId, &x})
	}
	if s.Cluster {
		name := "kafka-cluster"
		res = append(res, aclResource{kmsg.ACLResourceTypeCluster, &name})
	}
	for _, r := range res {
		if *r.name == "" {
			return nil, nil, nil, nil, 0, client.Usagef("%s: empty resource name", what)
		}
	}
	switch {
	case len(res) == 0 && what == "acl list":
		res = []aclResource{{typ: kmsg.ACLResourceTypeAny}}
	case len(res) == 0:
		return nil, nil, nil, nil, 0, client.Usagef("%s: want a resource: --topic, --group, --transactional-id or --cluster", what)
	}
	for _, p := range s.Allow {
		prins = append(prins, aclPrincipal{&p, kmsg.ACLPermissionTypeAllow})
	}
	for _, p := range s.Deny {
		prins = append(prins, aclPrincipal{&p, kmsg.ACLPermissionTypeDeny})
	}
	for _, p := range prins {
		if typ, _, ok := strings.Cut(*p.name, ":"); !ok || typ == "" {
			return nil, nil, nil, nil, 0, client.Usagef("%s: principal %q: want TYPE:NAME, e.g. User:alice", what, *p.name)
		}
	}
	switch {
	case len(prins) == 0 && add:
		return nil, nil, nil, nil, 0, client.Usagef("%s: want --allow or --deny PRINCIPAL", what)
	case len(prins) == 0:
		prins = []aclPrincipal{{perm: kmsg.ACLPermissionTypeAny}}
	}
	for _, h := range s.Hosts {
		if h == "" {
			return nil, nil, nil, nil, 0, client.Usagef("%s: empty --host (* is every host)", what)
		}
		hosts = append(hosts, &h)
	}
	if len(hosts) == 0 {
		if add {
			star := "*"
			hosts = []*string{&star}
		} else {
			hosts = []*string{nil}
		}
	}
	for _, o := range s.Operations {
		op, ok := parseOperation(o)
		if !ok {
			return nil, nil, nil, nil, 0, client.Usagef("%s: unknown operation %q: want read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write or all", what, o)
		}
		ops = append(ops, op)
	}
	switch {
	case len(ops) == 0 && add:
		return nil, nil, nil, nil, 0, client.Usagef("%s: want --operation", what)
	case len(ops) == 0:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	}
	return res, prins, hosts, ops, pat, nil
}

// ParseACLSpec checks s for what ("acl add", "acl remove", "acl list")
// without asking the broker: mqctl refuses a bad spec as a usage error
// before it connects.
func ParseACLSpec(what string, s ACLSpec) error {
	_, _, _, _, _, err := s.parse(what)
	return err
}

// AddACLs creates the bindings s names and returns them. A binding the
// broker refuses is a failure; the others are created.
func (a *Admin) AddACLs(ctx context.Context, s ACLSpec) (ACLs, error) {
	const what = "acl add"
	res, prins, hosts, ops, pat, err := s.parse(what)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, r := range res {
		for _, p := range prins {
			for _, h := range hosts {
				for _, op := range ops {
					c := kmsg.NewCreateACLsRequestCreation()
					c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, *r.name, pat
					c.Principal, c.Host, c.Operation, c.PermissionType = *p.name, *h, op, p.perm
					req.Creations = append(req.Creations, c)
				}
			}
		}
	}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, requestError(what, err)
	}
	var out ACLs
	var failed []string
	for i, r := range resp.Results {
		if i >= len(req.Creations) {
			break
		}
		c := req.Creations[i]
		acl := aclOf(c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host, c.Operation, c.PermissionType)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			failed = append(failed, acl.ResourceType+" "+acl.ResourceName+" "+acl.Principal+" "+acl.Operation+": "+errText(err, deref(r.ErrorMessage)))
			continue
		}
		out = append(out, acl)
	}
	sortACLs(out)
	return out, failures(what, failed)
}

// RemoveACLs deletes the bindings s selects and returns them.
func (a *Admin) RemoveACLs(ctx context.Context, s ACLSpec) (ACLs, error) {
	const what = "acl remove"
	res, prins, hosts, ops, pat, err := s.parse(what)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, r := range res {
		for _, p := range prins {
			for _, h := range hosts {
				for _, op := range ops {
					f := kmsg.NewDeleteACLsRequestFilter()
					f.ResourceType, f.ResourceName, f.ResourcePatternType = r.typ, r.name, pat
					f.Principal, f.Host, f.Operation, f.PermissionType = p.name, h, op, p.perm
					req.Filters = append(req.Filters, f)
				}
			}
		}
	}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, requestError(what, err)
	}
	out := ACLs{}
	var failed []string
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			failed = append(failed, errText(err, deref(r.ErrorMessage)))
			continue
		}
		for _, m := range r.MatchingACLs {
			out = append(out, aclOf(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType))
		}
	}
	sortACLs(out)
	return slices.Compact(out), failures(what, failed)
}

// ListACLs returns the bindings s selects.
func (a *Admin) ListACLs(ctx context.Context, s ACLSpec) (ACLs, error) {
	const what = "acl list"
	res, prins, hosts, ops, pat, err := s.parse(what)
	if err != nil {
		return nil, err
	}
	out := ACLs{}
	for _, r := range res {
		for _, p := range prins {
			for _, h := range hosts {
				for _, op := range ops {
					req := kmsg.NewPtrDescribeACLsRequest()
					req.ResourceType, req.ResourceName, req.ResourcePatternType = r.typ, r.name, pat
					req.Principal, req.Host, req.Operation, req.PermissionType = p.name, h, op, p.perm
					resp, err := req.RequestWith(ctx, a.cl)
					if err != nil {
						return nil, requestError(what, err)
					}
					if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
						return nil, client.Failf("%s: %s", what, errText(err, deref(resp.ErrorMessage)))
					}
					for _, rs := range resp.Resources {
						for _, b := range rs.ACLs {
							out = append(out, aclOf(rs.ResourceType, rs.ResourceName, rs.ResourcePatternType, b.Principal, b.Host, b.Operation, b.PermissionType))
						}
					}
				}
			}
		}
	}
	sortACLs(out)
	return slices.Compact(out), nil
}

func aclOf(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) ACL {
	return ACL{ResourceType: resourceTypeName(typ), ResourceName: name, PatternType: strings.ToLower(pat.String()),
		Principal: principal, Host: host, Operation: operationName(op), Permission: strings.ToLower(perm.String())}
}

func sortACLs(as ACLs) {
	slices.SortFunc(as, func(x, y ACL) int {
		for _, c := range [][2]string{{x.ResourceType, y.ResourceType}, {x.ResourceName, y.ResourceName}, {x.PatternType, y.PatternType},
			{x.Principal, y.Principal}, {x.Host, y.Host}, {x.Operation, y.Operation}, {x.Permission, y.Permission}} {
			if n := strings.Compare(c[0], c[1]); n != 0 {
				return n
			}
		}
		return 0
	})
}
