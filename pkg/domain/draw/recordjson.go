package draw

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// HeadJSON is the JSON of rec without its entries: what json.Marshal
// writes for rec, but its "entries" (the last field).
func HeadJSON(rec Record) ([]byte, error) {
	rec.Entries = nil
	return json.Marshal(rec)
}

// RecordWriter writes a record's JSON as it is read, its entries a page at
// a time: byte for byte what json.Marshal writes for the whole record, so
// a record served a page at a time keeps every copy saved before and every
// checker of it, and its size in memory is a page's.
type RecordWriter struct {
	w    io.Writer
	head []byte
	// listed: the head and the entries' opening are written.
	listed bool
}

// NewRecordWriter writes to w the record whose head is head (HeadJSON).
func NewRecordWriter(w io.Writer, head []byte) *RecordWriter {
	return &RecordWriter{w: w, head: head}
}

// Entries writes the next entries of the ranking.
func (rw *RecordWriter) Entries(page []Ranked) error {
	if len(page) == 0 {
		return nil
	}
	b, err := json.Marshal(page)
	if err != nil {
		return err
	}
	if !rw.listed {
		// "entries" is the record's last field, and the head is never {}
		// (activity_id, state and commitment are always there).
		rw.listed = true
		if _, err := rw.w.Write(rw.head[:len(rw.head)-1]); err != nil {
			return err
		}
		if _, err := io.WriteString(rw.w, `,"entries":`); err != nil {
			return err
		}
		_, err = rw.w.Write(b[:len(b)-1])
		return err
	}
	b[0] = ','
	_, err = rw.w.Write(b[:len(b)-1])
	return err
}

// Close ends the record: with no entries it is the head alone (Record
// leaves an empty list out).
func (rw *RecordWriter) Close() error {
	if !rw.listed {
		_, err := rw.w.Write(rw.head)
		return err
	}
	_, err := io.WriteString(rw.w, "]}")
	return err
}

// Read decodes a record from r as a stream and gives it to v: each field
// but the entries to Head, each entry to Add as it is decoded, so only one
// entry's JSON is held at a time. It decodes what json.Unmarshal of a
// Record takes (fields in any order, keys matched without regard to case,
// unknown ones skipped) and returns the head. A record with two lists of
// entries is refused (Unmarshal would keep the last one only).
func (v *Verifier) Read(r io.Reader) (Record, error) {
	dec := json.NewDecoder(r)
	var head Record
	t, err := dec.Token()
	if err != nil {
		return head, err
	}
	if t != json.Delim('{') {
		return head, fmt.Errorf("a record is a JSON object, not %v", t)
	}
	// after: a field came after the entries, so the head the entries were
	// checked against was not the whole of it.
	listed, after := false, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return head, err
		}
		key, _ := t.(string)
		if !strings.EqualFold(key, "entries") {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return head, err
			}
			// One field at a time into the same head, as Unmarshal fills
			// a struct key by key.
			name, _ := json.Marshal(key)
			field := append(append(append(append([]byte("{"), name...), ':'), raw...), '}')
			if err := json.Unmarshal(field, &head); err != nil {
				return head, err
			}
			after = after || listed
			continue
		}
		if listed {
			return head, errors.New(`the record lists "entries" twice`)
		}
		listed = true
		v.Head(head)
		if err := v.readEntries(dec); err != nil {
			return head, fmt.Errorf("entries: %w", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return head, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return head, errors.New("data after the record")
	}
	if !listed || after {
		v.Head(head)
	}
	return head, nil
}

// readEntries gives v each entry of the list dec is at (null is none).
func (v *Verifier) readEntries(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return fmt.Errorf("a list, not %v", t)
	}
	for dec.More() {
		var e Ranked
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("entry %d: %w", len(v.list)+1, err)
		}
		v.Add(e)
	}
	_, err = dec.Token()
	return err
}
