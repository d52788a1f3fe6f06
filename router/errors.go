package router

import "errors"

// ErrTopic reports an event whose event_type yields an invalid topic name.
var ErrTopic = errors.New("router: invalid topic")
