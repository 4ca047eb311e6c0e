package orderevents

import (
	"context"
	"fmt"
	"strconv"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// ItemKey is the message key of the events of a sale whose first item is
// itemID (order.TagOf of their order numbers): for a sale of one item, the
// key of that item's events.
func ItemKey(itemID int64) []byte { return strconv.AppendInt(nil, itemID, 10) }

// Decode parses and validates an event.
func Decode(b []byte) (order.Event, error) {
	// The event's own decoder, called directly: it decodes (and so checks)
	// the whole message itself, which json.Unmarshal would scan once more
	// before handing it over.
	var e order.Event
	if err := e.UnmarshalJSON(b); err != nil {
		return e, fmt.Errorf("decode event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("invalid event: %w", err)
	}
	return e, nil
}

// traceHeaders are the W3C trace context headers of ctx's span (none when
// ctx holds no span).
func traceHeaders(ctx context.Context) []kafka.Header {
	parent, state := tracing.Header(ctx)
	if parent == "" {
		return nil
	}
	h := []kafka.Header{{Key: "traceparent", Value: []byte(parent)}}
	if state != "" {
		h = append(h, kafka.Header{Key: "tracestate", Value: []byte(state)})
	}
	return h
}

// withTrace copies the W3C trace context of m's headers into e.
func withTrace(e order.Event, m kafka.Message) order.Event {
	for _, h := range m.Headers {
		switch h.Key {
		case "traceparent":
			e.TraceParent = string(h.Value)
		case "tracestate":
			e.TraceState = string(h.Value)
		}
	}
	return e
}
