-- 0007: every identifier a client or provider chooses compares byte for
-- byte, as Redis compares it. Under the default collation
-- (utf8mb4_*_ci, PAD SPACE) `ab1` and `Ab1` were one transaction id and
-- `r1` and `R1` one restock key: the second was taken for a repeat of the
-- first and applied nothing. VARBINARY has no collation, so no case
-- folding and no trailing-space padding (0006 did the same for
-- orders.user_id). The values are ASCII (the api's checks), so each
-- keeps its bytes and its length; the unique keys uk_orders_order_no,
-- uk_payments_transaction and uk_restocks_key, and idx_payments_order,
-- are rebuilt on the new columns and only grow stricter, so no existing
-- row conflicts. order_no is upper case by construction; it is bytes too
-- so that the join of payments to orders and every look-up by number
-- compare one way.
ALTER TABLE orders
  MODIFY order_no        VARBINARY(48) NOT NULL,
  MODIFY idempotency_key VARBINARY(64) NOT NULL;

ALTER TABLE payments
  MODIFY transaction_id VARBINARY(128) NOT NULL,
  MODIFY order_no       VARBINARY(48)  NOT NULL;

ALTER TABLE restocks
  MODIFY idempotency_key VARBINARY(64) NOT NULL;
