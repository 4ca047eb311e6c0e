package kafkatest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestTemporaryIsALeaderMovingNotAnyError(t *testing.T) {
	wrapped := fmt.Errorf("end offset of t/0: %w", kafka.NotLeaderForPartition)
	if !temporary(wrapped) {
		t.Error("NotLeaderForPartition wrapped: not temporary")
	}
	if temporary(fmt.Errorf("end offset of t/0: %w", kafka.TopicAuthorizationFailed)) {
		t.Error("TopicAuthorizationFailed: temporary")
	}
	if temporary(errors.New("no metadata")) {
		t.Error("a plain error: temporary")
	}
}
