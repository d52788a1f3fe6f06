package otlp

import "errors"

// ErrHeadersFile is a metrics.otlp.headers-file line that is not a
// "Name: value" header.
var ErrHeadersFile = errors.New("want one header a line, Name: value (blank lines and lines starting with # are skipped)")
