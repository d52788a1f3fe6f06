// Package lint holds the project's own static checks, run as tests (go
// test ./internal/lint, part of make unit and make vet): rules of the house
// style that go vet does not know.
package lint
