-- 0004: payment notifications from the provider, and sales ended or
-- cancelled early.

-- One row per provider transaction (the unique transaction_id makes a
-- notification idempotent). outcome is PAID when it paid its order, REFUND
-- when the money arrived for an order that could not be paid any more
-- (refund_reason: the order's status then, CLOSED, FAILED or PAID); those
-- rows are the refunds an operator owes, refunded_at NULL until done.
CREATE TABLE payments (
  id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  transaction_id VARCHAR(128) NOT NULL,
  order_no       VARCHAR(48)  NOT NULL,
  amount         BIGINT       NOT NULL,
  currency       CHAR(3)      NOT NULL,
  outcome        VARCHAR(16)  NOT NULL,
  refund_reason  VARCHAR(64)  NULL,
  refunded_at    DATETIME(3)  NULL,
  received_at    DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  UNIQUE KEY uk_payments_transaction (transaction_id),
  KEY idx_payments_order (order_no),
  KEY idx_payments_refund (outcome, refunded_at),
  CONSTRAINT chk_payments_outcome CHECK (outcome IN ('PAID', 'REFUND')),
  CONSTRAINT chk_payments_amount CHECK (amount >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- A sale ended early has ends_at moved to the moment it ended; a cancelled
-- one also has cancelled_at, and the closer closes its CREATED orders.
ALTER TABLE activities
  ADD COLUMN cancelled_at DATETIME(3) NULL;
