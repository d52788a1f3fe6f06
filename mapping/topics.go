package mapping

import (
	"slices"
)

// String returns the template as configured: literals and {column}
// placeholders ("outbox.event.{aggregatetype}").
func (t Template) String() string {
	return t.render(func(col string) string { return "{" + col + "}" })
}

// TopicSlots returns the slots a row's topic is read from: the topic
// column, or the template's columns in order of first use; none for a
// fixed topic.
func (m *Mapping) TopicSlots() []int {
	if m.TopicColumn >= 0 {
		return []int{m.TopicColumn}
	}
	var slots []int
	for _, p := range m.Topic.Parts {
		if p.Column != "" && !slices.Contains(slots, p.Slot) {
			slots = append(slots, p.Slot)
		}
	}
	return slots
}

// TopicSetting names where the mapping's topic comes from, for messages:
// "topic-column x", "topic t" or "topic template t".
func (m *Mapping) TopicSetting() string {
	if m.TopicColumn >= 0 {
		if m.TopicRegex != nil {
			return "topic-column " + m.Name(m.TopicColumn) + " renamed by topic-regex " + m.TopicRegex.Regex + " to topic-replacement " + m.TopicRegex.Replacement
		}
		return "topic-column " + m.Name(m.TopicColumn)
	}
	if name, ok := m.Topic.Fixed(); ok {
		return "topic " + name
	}
	return "topic template " + m.Topic.String()
}

// TopicOf returns the topic of a row as the router names it: the fixed
// topic, the topic column's value (renamed by TopicRegex), or the template rendered over vals (by
// slot, nil for NULL). ok is false when the row names no topic: a NULL in
// the topic column or in a template's column, or an empty value under the
// im preset (an empty event_type); the router makes such a row a poison
// record. The name is not checked against Kafka's rules
// (router.ValidTopic).
func (m *Mapping) TopicOf(vals [][]byte) (topic string, ok bool) {
	if m.TopicColumn >= 0 {
		if m.TopicColumn >= len(vals) || vals[m.TopicColumn] == nil {
			return "", false
		}
		if m.TopicRegex != nil {
			return m.TopicRegex.Apply(string(vals[m.TopicColumn])), true
		}
		return string(vals[m.TopicColumn]), true
	}
	if name, fixed := m.Topic.Fixed(); fixed {
		return name, true
	}
	if m.IM && slices.ContainsFunc(m.TopicSlots(), func(s int) bool { return s < len(vals) && len(vals[s]) == 0 }) {
		return "", false
	}
	b, ok := m.Topic.Append(nil, vals)
	return string(b), ok
}

// RouterTopic returns the Mapping of the im table read without a mapping
// (binlog.TableSet.Legacy): router.topic, a fixed name or a template over
// event_type, as its only column (slot 0), for listing the topics its rows
// go to with TopicSlots and TopicOf. It maps nothing else.
func RouterTopic(topic string) (*Mapping, error) {
	t, err := ParseTemplate(topic)
	if err != nil {
		return nil, err
	}
	m := &Mapping{IM: true, ID: -1, Payload: -1, Order: -1, Timestamp: -1, Partition: -1, TopicColumn: -1, TraceParent: -1, TraceState: -1, CEType: -1, CETime: -1}
	for i := range t.Parts {
		if c := t.Parts[i].Column; c != "" {
			if j := slices.Index(m.Cols, c); j >= 0 {
				t.Parts[i].Slot = j
				continue
			}
			t.Parts[i].Slot = len(m.Cols)
			m.Cols = append(m.Cols, c)
			m.Kinds = append(m.Kinds, KindString)
			m.Unsigned = append(m.Unsigned, false)
		}
	}
	m.Topic = t
	return m, nil
}

// Problems returns the problems joined in err (errors.Join, at any depth),
// each on its own; err alone when it joins none.
func Problems(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		if e != nil {
			out = append(out, Problems(e)...)
		}
	}
	return out
}
