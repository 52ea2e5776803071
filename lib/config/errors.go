package config

import (
	"errors"
	"fmt"
)

// Errors every validation failure wraps; test with errors.Is. Every error
// that matches ErrNotDynamic also matches ErrInvalidValue, so a caller that
// maps ErrInvalidValue to Kafka's INVALID_CONFIG handles both.
var (
	// ErrUnknownConfig: no property or topic config has this name.
	ErrUnknownConfig = errors.New("config: unknown property")
	// ErrInvalidValue: the value does not parse or is out of range.
	ErrInvalidValue = errors.New("config: invalid value")
	// ErrNotDynamic: a broker property that cannot change while mqd runs
	// (ValidateBrokerDynamicConfig).
	ErrNotDynamic = errors.New("config: cannot be changed at runtime")
	// ErrInvalidRequest: a request that is malformed whatever the
	// configs: a config named twice, a null value, an unknown operation
	// (CheckOps, Replace, TopicOverrides).
	ErrInvalidRequest = errors.New("config: invalid request")
	// ErrPartitionLimit: a request would go over max.partitions.per.request
	// or max.partitions.
	ErrPartitionLimit = errors.New("config: over a partition limit")
)

// Error is a failure to accept one property. Its message names where the
// property came from (a file and line, an environment variable, the command
// line), the property, the value and what is allowed.
type Error struct {
	Where   string // "mqd.conf:3", "$MQ_NUM_PARTITIONS", "command line"; may be empty
	Name    string // the property name
	Value   string // the value refused (empty for unknown properties)
	Allowed string // what would have been accepted, in words
	Err     error  // ErrUnknownConfig, ErrInvalidValue or ErrNotDynamic
	// Suggestion is, for an unknown name, the known one it is probably a
	// typo of ("log.retention.hours" for "log.retention.hourz"); may be
	// empty.
	Suggestion string
}

func (e *Error) Error() string {
	prefix := ""
	if e.Where != "" {
		prefix = e.Where + ": "
	}
	switch e.Err {
	case ErrUnknownConfig:
		if e.Suggestion != "" {
			return fmt.Sprintf("%sunknown property %q (did you mean %s?)", prefix, e.Name, e.Suggestion)
		}
		return fmt.Sprintf("%sunknown property %q", prefix, e.Name)
	case ErrNotDynamic:
		return fmt.Sprintf("%s%s cannot be changed while mqd runs; set it in the config file or on the command line", prefix, e.Name)
	}
	return fmt.Sprintf("%sinvalid value %q for %s: want %s", prefix, e.Value, e.Name, e.Allowed)
}

// Unwrap returns the sentinel; a not-dynamic error also matches
// ErrInvalidValue, which is how Kafka reports it (INVALID_CONFIG).
func (e *Error) Unwrap() []error {
	if e.Err == ErrNotDynamic {
		return []error{ErrNotDynamic, ErrInvalidValue}
	}
	return []error{e.Err}
}

// unknownBroker is the error for a broker property name nobody knows,
// with the nearest known name as a suggestion.
func unknownBroker(name string) error {
	return &Error{Name: name, Err: ErrUnknownConfig, Suggestion: closest(name, Properties())}
}

// unknownTopic is unknownBroker for topic configs.
func unknownTopic(name string) error {
	return &Error{Name: name, Err: ErrUnknownConfig, Suggestion: closest(name, topicNames())}
}

func invalid(name, value, allowed string) error {
	return &Error{Name: name, Value: value, Allowed: allowed, Err: ErrInvalidValue}
}

// at sets where an error came from, if it is an *Error without a place yet.
func at(where string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Where == "" {
		c := *e
		c.Where = where
		return &c
	}
	if where == "" {
		return err
	}
	return fmt.Errorf("%s: %w", where, err)
}
