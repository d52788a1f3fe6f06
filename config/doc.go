// Package config is the one loader of cdc-outbox's configuration: the
// defaults of every package's Config, then the YAML file (unknown keys are
// errors, named by their key path), then CDC_OUTBOX_* environment variables
// (an unknown or empty variable is an error naming the closest one).
//
// Load reads; Config.Check validates for what a command needs (Scope) and
// reports every problem at once, each naming the variable that set the
// value when one did. Secrets (source.password, checkpoint.password) are
// never part of an error or a log line: see binlog.Config.Redacted.
package config
