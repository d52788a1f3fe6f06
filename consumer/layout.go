package consumer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// NoSeqNo in Layout.SeqNo: the records carry no sequence number.
const NoSeqNo = "-"

// Layout says where a record carries its event id (the dedupe key), its
// ordering key and its sequence number: the publisher's mapping seen from
// the consumer. Fields left empty take the preset's values, which come
// from package mapping's own definitions (mapping.PublishedHeaders), so
// that they follow the publisher:
//
//	preset    event id header  ordering key  sequence number  event type header
//	im        event_id         record key    seq_no           event_type
//	debezium  id               record key    none             type
//	generic   event_id         record key    none             aggregate_type
//
// Without a sequence number (debezium and generic by default, or SeqNo
// "-") records are handled in offset order only, which is the publisher's
// commit order per key, and gap detection is off: no Gap is ever reported
// and Record.Late is never set (Run logs it at start). Dedupe by event id
// works the same for every layout.
type Layout struct {
	// Preset is the publisher's mapping preset: im (default), debezium or
	// generic (source.mapping.preset).
	Preset string `yaml:"preset"`
	// EventID is the header holding the event id, any bytes (a decimal
	// id, a UUID).
	EventID string `yaml:"event-id"`
	// Key is the header holding the ordering key; empty: the record key
	// (the mapping's key columns, joined with ":").
	Key string `yaml:"key"`
	// SeqNo is the header holding the sequence number within a key, a
	// decimal integer; "-" (NoSeqNo): none. Publish your mapping's order
	// column as a header (source.mapping.headers) to have one.
	SeqNo string `yaml:"seq-no"`
	// EventType is the header holding the event type: sequence numbers
	// count per key and event type (Record.EventType).
	EventType string `yaml:"event-type"`
}

// LayoutOf returns the Layout of the records of the publisher's mapping m
// (its source.mapping section): its preset, and the headers its overrides
// give the event id, the ordering column and the event type.
func LayoutOf(m mapping.Config) Layout {
	p := mapping.PublishedHeaders(m)
	l := Layout{Preset: m.Preset, EventID: p.EventID, SeqNo: p.Order, EventType: p.Type}
	if l.Preset == "" {
		l.Preset = mapping.PresetIM
	}
	if l.SeqNo == "" {
		l.SeqNo = NoSeqNo
	}
	return l
}

// WithDefaults returns l with its empty fields set from its preset (an
// unknown preset is left for Validate).
func (l Layout) WithDefaults() Layout {
	if l.Preset == "" {
		l.Preset = mapping.PresetIM
	}
	d := LayoutOf(mapping.Config{Preset: l.Preset})
	if l.EventID == "" {
		l.EventID = d.EventID
	}
	if l.SeqNo == "" {
		l.SeqNo = d.SeqNo
	}
	if l.EventType == "" {
		l.EventType = d.EventType
	}
	return l
}

// HasSeqNo reports whether records carry a sequence number (else they are
// ordered by offset only, gap detection off).
func (l Layout) HasSeqNo() bool { return l.SeqNo != "" && l.SeqNo != NoSeqNo }

func (l Layout) String() string {
	seq := l.SeqNo
	if !l.HasSeqNo() {
		seq = "none"
	}
	key := "the record key"
	if l.Key != "" {
		key = "header " + l.Key
	}
	return fmt.Sprintf("preset %s: event id from header %s, ordering key from %s, sequence number %s", l.Preset, l.EventID, key, seq)
}

// validate appends l's problems, each naming its field.
func (l Layout) validate(bad func(field, format string, args ...any)) {
	if !slices.Contains(mapping.Presets(), l.Preset) {
		bad("layout.preset", "%q: want one of %s (the publisher's source.mapping.preset)", l.Preset, strings.Join(mapping.Presets(), ", "))
	}
	if l.EventID == "" {
		bad("layout.event-id", "required: the header holding the event id")
	}
}
