package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// maxBody is the largest delivery the receiver reads.
const maxBody = 1 << 20

// maxSeen is how many message ids the receiver remembers to drop a
// redelivery; past it the oldest are forgotten.
const maxSeen = 100_000

// Receiver is the endpoint a shop's developer runs on their machine to
// watch the deliveries (`api webhook-listen`): it verifies each one with
// the secrets, answers 204 to a good one and 400 to one it refuses (and
// writes why to notes), drops a redelivery of a message id it has seen
// (writing "duplicate <id>" to notes) and writes each new event to events
// as one JSON line: {"id", "type", "timestamp", "data"}.
type Receiver struct {
	secrets []string

	mu     sync.Mutex // orders the writes and guards the ids seen
	events io.Writer
	notes  io.Writer
	seen   map[string]bool
	order  []string // the ids seen, oldest first
}

// NewReceiver returns a receiver of the deliveries signed with any of the
// secrets, or an error if one is malformed.
func NewReceiver(secrets []string, events, notes io.Writer) (*Receiver, error) {
	if _, err := signers(secrets); err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	return &Receiver{secrets: secrets, events: events, notes: notes, seen: make(map[string]bool)}, nil
}

// delivery is the body of a delivery, the event.
type delivery struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// received is the line the receiver writes for a new event.
type received struct {
	ID string `json:"id"`
	delivery
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "deliveries are POSTs", http.StatusMethodNotAllowed)
		return
	}
	id := r.Header.Get(HeaderID)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		rc.refuse(w, id, status, fmt.Errorf("read body: %w", err))
		return
	}
	if err := Verify(rc.secrets, r.Header, body, time.Now()); err != nil {
		rc.refuse(w, id, http.StatusBadRequest, err)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		rc.refuse(w, id, http.StatusBadRequest, fmt.Errorf("the body is not an event: %w", err))
		return
	}
	line, err := json.Marshal(received{ID: id, delivery: d}) // compacts data to one line
	if err != nil {
		rc.refuse(w, id, http.StatusBadRequest, fmt.Errorf("the body is not an event: %w", err))
		return
	}
	if status := rc.record(id, line); status != http.StatusNoContent {
		http.Error(w, "the event was not written", status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// record writes a new event's line, or notes a duplicate, and returns the
// status to answer.
func (rc *Receiver) record(id string, line []byte) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen[id] {
		fmt.Fprintf(rc.notes, "duplicate %s\n", id)
		return http.StatusNoContent
	}
	if _, err := rc.events.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(rc.notes, "event %s not written: %v\n", id, err)
		return http.StatusInternalServerError // the sender tries again
	}
	rc.seen[id] = true
	rc.order = append(rc.order, id)
	if len(rc.order) > maxSeen {
		delete(rc.seen, rc.order[0])
		rc.order = rc.order[1:]
	}
	return http.StatusNoContent
}

// refuse answers status and notes why.
func (rc *Receiver) refuse(w http.ResponseWriter, id string, status int, why error) {
	rc.mu.Lock()
	fmt.Fprintf(rc.notes, "refused %q: %v\n", id, why)
	rc.mu.Unlock()
	http.Error(w, why.Error(), status)
}
