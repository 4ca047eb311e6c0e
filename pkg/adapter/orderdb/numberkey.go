package orderdb

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/seckill/seckill/pkg/domain/order"
)

// OrderNumberKey returns the key every api instance signs order numbers
// with (order.NewSignedNumberGenerator), making it on the first call
// against a database: it offers 32 bytes from crypto/rand with INSERT
// IGNORE, then reads whichever offer won. Either statement is safe to
// repeat after a lost answer, so the caller may simply call again.
func (s *Orders) OrderNumberKey(ctx context.Context) ([]byte, error) {
	offer := make([]byte, order.NumberKeySize)
	if _, err := rand.Read(offer); err != nil {
		return nil, fmt.Errorf("order number key: %w", err)
	}
	g := s.db(ctx)
	// A hex literal, not a placeholder: one plain statement (no prepare).
	insert := fmt.Sprintf("INSERT IGNORE INTO shared_keys (name, value) VALUES ('order_number', X'%x')", offer)
	if err := g.Exec(insert).Error; err != nil {
		return nil, wrap("offer order number key", err)
	}
	var key []byte
	if err := g.Raw("SELECT value FROM shared_keys WHERE name = 'order_number'").Row().Scan(&key); err != nil {
		return nil, wrap("read order number key", err)
	}
	if len(key) != order.NumberKeySize {
		return nil, fmt.Errorf("order number key: %d bytes in shared_keys, want %d", len(key), order.NumberKeySize)
	}
	return key, nil
}
