-- 0007: identifiers compared byte for byte; the data-loss watch's record.
-- Every identifier a client or provider chooses compares byte for
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

-- What the consumer's data-loss watch (consumer/internal/heal) knows of
-- one Redis dataset, named by the key of its generation marker, kept here
-- so that a loss that happened while no consumer ran is still noticed: at
-- start a watch compares Redis with this row, not with what it saw itself.
-- generation: the highest value a watch wrote to the marker (a marker
-- behind it, or gone, means Redis came back from an older state); run_ids:
-- the masters' run ids last seen ("addr=run_id", sorted, comma-separated;
-- '' before the first look; 16 KiB hold some 250 masters), a changed one
-- is a restart; losses counts the losses detected and healed the ones a
-- finished repair covers, so a loss detected by a watch that died before
-- repairing it is repaired by the next one (healed < losses: a repair is
-- owed).
CREATE TABLE redis_watches (
  marker      VARBINARY(255)   NOT NULL PRIMARY KEY,
  generation  BIGINT           NOT NULL DEFAULT 0,
  run_ids     VARBINARY(16384) NOT NULL DEFAULT '',
  losses      BIGINT           NOT NULL DEFAULT 0,
  healed      BIGINT           NOT NULL DEFAULT 0,
  last_loss   VARCHAR(512)     NULL,
  lost_at     DATETIME(3)      NULL,
  updated_at  DATETIME(3)      NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
