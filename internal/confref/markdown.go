package confref

import (
	"fmt"
	"strings"
)

// Page is what Markdown writes around the sections.
type Page struct {
	// Title is the page's heading.
	Title string
	// Generated says how the page is made and regenerated (the first
	// paragraph).
	Generated string
	// Intro is Markdown placed before the sections.
	Intro string
	// TopLevel names the section of the top-level keys.
	TopLevel string
}

// Markdown renders the sections as a page: a heading per section (## for
// the top-level ones, ### and #### below), its doc, where else its keys
// apply, and a table of its keys (key, type, default, environment
// variable, rule, description; a secret's description says its -file
// variant).
func Markdown(p Page, sections []Section) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", p.Title, p.Generated)
	if p.Intro != "" {
		b.WriteString(strings.TrimSpace(p.Intro) + "\n\n")
	}
	keyed := map[string]bool{}
	for _, s := range sections {
		keyed[s.Path] = len(s.Keys) > 0
	}
	// level is a section's heading depth: a subsection whose parent has
	// no keys of its own (metrics.otlp: metrics-addr is a top-level key)
	// is a section of its own, in the index, not under the one before.
	var level func(path string) int
	level = func(path string) int {
		i := strings.LastIndex(path, ".")
		switch {
		case depth(path) <= 1 || i <= 0:
			return depth(path)
		case !keyed[path[:i]]:
			return 1
		}
		return level(path[:i]) + 1
	}
	var toc []string
	for _, s := range sections {
		if level(s.Path) <= 1 && len(s.Keys) > 0 {
			toc = append(toc, fmt.Sprintf("[%s](#%s)", title(p, s.Path), anchor(title(p, s.Path))))
		}
	}
	b.WriteString("Sections: " + strings.Join(toc, " · ") + "\n")
	for _, s := range sections {
		if len(s.Keys) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s %s\n\n", strings.Repeat("#", min(max(level(s.Path), 1), 3)+1), title(p, s.Path))
		if s.Doc != "" {
			b.WriteString(s.Doc + "\n\n")
		}
		if len(s.Also) > 0 {
			var also []string
			for _, a := range s.Also {
				also = append(also, "`"+a+"`")
			}
			fmt.Fprintf(&b, "The same keys apply at %s.\n\n", strings.Join(also, ", "))
		}
		b.WriteString("| Key | Type | Default | Environment variable | Rule | Description |\n|---|---|---|---|---|---|\n")
		for _, k := range s.Keys {
			doc := k.Doc
			if k.Same != "" {
				doc += fmt.Sprintf(" Its keys are those of [%s](#%s).", k.Same, anchor(title(p, k.Same)))
			}
			if k.File != "" {
				doc += fmt.Sprintf(" Secret: never logged; or read it from a file with `%s`.", k.File)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Path, k.Type, code(k.Default), code(k.Env), cell(k.Rule), cell(doc))
		}
	}
	return b.String()
}

// depth is 0 for the top level, 1 for "kafka", 2 for "kafka.sasl" or
// "source.tables[]".
func depth(path string) int {
	if path == "" {
		return 0
	}
	return strings.Count(path, ".") + 1
}

func title(p Page, path string) string {
	if path == "" {
		return p.TopLevel
	}
	return path
}

// anchor is GitHub's anchor of a heading: lower case, spaces as '-',
// other punctuation than '-' and '_' dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// code is an inline code cell, "—" when empty.
func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// cell escapes a table cell's pipes; "-" and "" become "—".
func cell(s string) string {
	if s == "" || s == "-" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
