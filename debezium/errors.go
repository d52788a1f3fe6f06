package debezium

import "errors"

// ErrOffset matches every error about a Debezium offset: a file or record
// that is not Kafka Connect's offset format, an offset of no binlog
// connector, a snapshot that did not complete, a name that matches none.
var ErrOffset = errors.New("debezium offset")
