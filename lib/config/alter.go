package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// OpType is an IncrementalAlterConfigs operation, with Kafka's numbers.
type OpType int8

// The operations: SET and DELETE one config, APPEND to and SUBTRACT from
// a list-valued one (cleanup.policy).
const (
	OpSet      OpType = 0
	OpDelete   OpType = 1
	OpAppend   OpType = 2
	OpSubtract OpType = 3
)

// Op is one alteration of one config. Value is nil for DELETE (and
// refused as null for the others).
type Op struct {
	Name  string
	Type  OpType
	Value *string
}

// Alteration computes a resource's new dynamic configs from its current
// ones. base describes the values the resource has without its own
// dynamic configs (what APPEND starts from when no value is set).
type Alteration func(current map[string]string, base map[string]Entry) (map[string]string, error)

// alterError is a refused alteration: its message, and the sentinel it
// matches (ErrInvalidRequest, ErrUnknownConfig or ErrInvalidValue).
type alterError struct {
	err error
	msg string
}

func (e *alterError) Error() string { return e.msg }
func (e *alterError) Unwrap() error { return e.err }

func refused(sentinel error, format string, args ...any) error {
	return &alterError{err: sentinel, msg: fmt.Sprintf(format, args...)}
}

// Replace is the legacy AlterConfigs' alteration: the configs given (as
// OpSet) replace all of a resource's dynamic configs; those not given are
// deleted. A config given twice, or with a null value, is refused
// (ErrInvalidRequest).
func Replace(given []Op) Alteration {
	return func(map[string]string, map[string]Entry) (map[string]string, error) {
		out := make(map[string]string, len(given))
		for _, c := range given {
			if _, ok := out[c.Name]; ok {
				return nil, refused(ErrInvalidRequest, "config %q is given more than once", c.Name)
			}
			if c.Value == nil {
				return nil, refused(ErrInvalidRequest, "null value not supported for config %q", c.Name)
			}
			out[c.Name] = *c.Value
		}
		return out, nil
	}
}

// CheckOps refuses malformed operations (ErrInvalidRequest): a config
// named twice, an unknown operation, a null value for anything but
// DELETE.
func CheckOps(ops []Op) error {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return refused(ErrInvalidRequest, "config %q is altered more than once", op.Name)
		}
		seen[op.Name] = true
		switch op.Type {
		case OpSet, OpAppend, OpSubtract:
			if op.Value == nil {
				return refused(ErrInvalidRequest, "null value not supported for config %q", op.Name)
			}
		case OpDelete:
		default:
			return refused(ErrInvalidRequest, "unknown operation %d for config %q", int8(op.Type), op.Name)
		}
	}
	return nil
}

// Incremental is IncrementalAlterConfigs' alteration: current with ops
// applied, ops checked by CheckOps first. APPEND adds the items of a
// comma-separated value that the list lacks; SUBTRACT removes them; both
// start from the resource's effective value (base when it has no value of
// its own) and apply only to list-valued configs (else ErrInvalidValue,
// or ErrUnknownConfig for a name base lacks).
func Incremental(ops []Op) Alteration {
	return func(current map[string]string, base map[string]Entry) (map[string]string, error) {
		return applyOps(current, base, ops)
	}
}

func applyOps(current map[string]string, base map[string]Entry, ops []Op) (map[string]string, error) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, op := range ops {
		switch op.Type {
		case OpSet:
			out[op.Name] = *op.Value
		case OpDelete:
			delete(out, op.Name)
		default: // APPEND, SUBTRACT: CheckOps allows nothing else
			e, ok := base[op.Name]
			if !ok {
				return nil, refused(ErrUnknownConfig, "unknown config %q", op.Name)
			}
			if e.Type != TypeList {
				return nil, refused(ErrInvalidValue, "cannot %s config %q: it is not a list", opName(op.Type), op.Name)
			}
			value, ok := out[op.Name]
			if !ok && e.Value != nil {
				value = *e.Value
			}
			items := splitList(value)
			for _, item := range splitList(*op.Value) {
				if op.Type == OpAppend {
					if !slices.Contains(items, item) {
						items = append(items, item)
					}
				} else {
					items = slices.DeleteFunc(items, func(s string) bool { return s == item })
				}
			}
			out[op.Name] = strings.Join(items, ",")
		}
	}
	return out, nil
}

func opName(op OpType) string {
	if op == OpAppend {
		return "APPEND to"
	}
	return "SUBTRACT from"
}

// splitList splits a list-valued config ("compact, delete") into its
// items, without blanks.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
