package audit

import "errors"

// ErrNoTable: the source has no outbox table the audit can walk (every
// table has a string id column: the audit needs an integer id; verify
// checks string ids).
var ErrNoTable = errors.New("audit: no outbox table with an integer id column")

// ErrState: the audit's state in Redis does not parse (written by another
// version, or edited): delete the key (it names it) to start over.
var ErrState = errors.New("audit: stored state does not parse")
