package httpapi

import (
	"encoding/json"
	"testing"
	"time"
)

// The poll's hand-written encoding writes what encoding/json writes.
func TestQueueViewJSONIsEncodingJSONs(t *testing.T) {
	pos := int64(42)
	at := time.Date(2026, 12, 2, 3, 4, 5, 678_000_000, time.UTC)
	for _, v := range []QueueView{
		{State: QueueWaiting, PollAfterMS: 5000, ETASeconds: 19},
		{State: QueueWaiting, Position: &pos, Ahead: 41, ETASeconds: 9, PollAfterMS: 2250},
		{State: QueueAdmitted, Position: &pos, PollAfterMS: 5000, Admission: "a1.7.1796177983836.Ym9i.qMS0IMBP-_x", AdmissionExpiresAt: &at},
		{State: QueueSoldOut, Position: &pos, PollAfterMS: 5000},
		{State: QueueEnded},
		{State: QueueOrdered, Position: &pos, OrderNo: "01KBFX4Q0M3V8W6J2N5R7T9Y1Z-42"},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	}
}
