package mapping

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Debezium's defaults of route.topic.regex and route.topic.replacement
// (EventRouterConfigDefinition, 3.6.1.Final).
const (
	DefaultTopicRegex       = "(?<routedByValue>.*)"
	DefaultTopicReplacement = "outbox.event.${routedByValue}"
)

// TopicRegex is Debezium's route.topic.regex with route.topic.replacement:
// the Outbox Event Router hands the route.by.field value (here the
// topic-column's) to Kafka Connect's RegexRouter, which renames the topic
// when the regex matches the whole value (Matcher.matches) and keeps the
// value unchanged otherwise; the new name is Matcher.replaceFirst, which
// replaces the first match found by an unanchored search (for most regexes
// the whole value) and keeps the text around it. The regex is RE2 syntax
// (Go's regexp: Java's lookaround, backreferences and possessive
// quantifiers are refused at load); the replacement is Java's
// (java.util.regex.Matcher.appendReplacement): ${name} and $n insert a
// group (nothing for a group that did not take part), \x is x.
type TopicRegex struct {
	Regex, Replacement string

	full, find *regexp.Regexp
	parts      []replPart
}

// replPart is a literal (group -1) or a capturing group's text.
type replPart struct {
	lit   string
	group int
}

// CompileTopicRegex compiles a route.topic.regex and its
// route.topic.replacement; the replacement's group references are checked
// against the regex as Java checks them when the first record is renamed
// (an error there fails a Debezium task; here the start).
func CompileTopicRegex(regex, replacement string) (*TopicRegex, error) {
	find, err := regexp.Compile(regex)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w (RE2 syntax: Go's regexp)", regex, err)
	}
	for _, name := range find.SubexpNames()[1:] {
		if name != "" && !javaGroupName(name) {
			return nil, fmt.Errorf("regex %q: group name %q: Java takes ASCII letters and digits, starting with a letter", regex, name)
		}
	}
	full, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w (RE2 syntax: Go's regexp)", regex, err)
	}
	t := &TopicRegex{Regex: regex, Replacement: replacement, find: find, full: full}
	if t.parts, err = parseReplacement(replacement, find); err != nil {
		return nil, fmt.Errorf("replacement %q: %w", replacement, err)
	}
	return t, nil
}

func javaGroupName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// parseReplacement parses a Java replacement string
// (Matcher.appendExpandedReplacement, JDK 17) against re's groups, with
// Java's errors.
func parseReplacement(s string, re *regexp.Regexp) ([]replPart, error) {
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing (a trailing \\)")
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			lit.WriteString(s[i : i+n])
			i += n
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("illegal group reference: group index is missing (a trailing $; write \\$ for a $)")
			}
			ref := 0
			if s[i] == '{' {
				i++
				j := i
				for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
					j++
				}
				name := s[i:j]
				switch {
				case name == "":
					return nil, errors.New("named capturing group has 0 length name")
				case j == len(s) || s[j] != '}':
					return nil, errors.New("named capturing group is missing trailing '}'")
				case name[0] >= '0' && name[0] <= '9':
					return nil, fmt.Errorf("capturing group name {%s} starts with digit character", name)
				}
				if ref = re.SubexpIndex(name); ref < 0 {
					return nil, fmt.Errorf("no group with name {%s} in the regex", name)
				}
				i = j + 1
			} else {
				if s[i] < '0' || s[i] > '9' {
					return nil, fmt.Errorf("illegal group reference $%c: want ${name} or $n (write \\$ for a $)", s[i])
				}
				ref = int(s[i] - '0')
				i++
				// Java takes the longest number that is still a group.
				for i < len(s) && s[i] >= '0' && s[i] <= '9' && ref*10+int(s[i]-'0') <= groups {
					ref = ref*10 + int(s[i]-'0')
					i++
				}
				if ref > groups {
					return nil, errors.New("no group " + strconv.Itoa(ref) + " in the regex")
				}
			}
			flush()
			parts = append(parts, replPart{group: ref})
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return parts, nil
}

// Apply returns the topic of a route.by value: the replacement when the
// regex matches the whole value, else the value unchanged (RegexRouter).
func (t *TopicRegex) Apply(v string) string {
	if !t.full.MatchString(v) {
		return v
	}
	loc := t.find.FindStringSubmatchIndex(v)
	if loc == nil {
		return v
	}
	var b strings.Builder
	b.WriteString(v[:loc[0]])
	for _, p := range t.parts {
		if p.group < 0 {
			b.WriteString(p.lit)
		} else if s, e := loc[2*p.group], loc[2*p.group+1]; s >= 0 && e >= 0 {
			b.WriteString(v[s:e])
		}
	}
	b.WriteString(v[loc[1]:])
	return b.String()
}
