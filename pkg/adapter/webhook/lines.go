package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/seckill/seckill/pkg/domain/outbox"
)

// ReadEvents reads the events a Receiver wrote (`api webhook-listen`'s
// output: one JSON line each), in the order they were written, which is
// the order they arrived: what the event checker (package eventcheck)
// holds to MySQL. Blank lines are skipped; a line that is not an event of
// the documented schema (a field it does not have, no id, type or
// timestamp) is an error naming the line.
func ReadEvents(r io.Reader) ([]outbox.Event, error) {
	sc := bufio.NewScanner(r)
	// A line holds a body of up to maxBody and the id beside it.
	sc.Buffer(make([]byte, 0, 64<<10), 2*maxBody)
	var out []outbox.Event
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		e, err := parseEvent(line)
		if err != nil {
			return nil, fmt.Errorf("read events: line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read events: after %d: %w", len(out), err)
	}
	return out, nil
}

// parseEvent decodes one line, refusing a field the schema does not have
// (docs/schemas/order-event.schema.json allows none).
func parseEvent(line []byte) (outbox.Event, error) {
	var e outbox.Event
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("not an event: %w", err)
	}
	if dec.More() {
		return e, errors.New("not an event: more than one JSON value")
	}
	switch {
	case e.ID == "":
		return e, errors.New("an event without an id")
	case e.Type == "":
		return e, fmt.Errorf("event %s has no type", e.ID)
	case e.Time.IsZero():
		return e, fmt.Errorf("event %s has no timestamp", e.ID)
	}
	return e, nil
}
