-- 0005: restocks and the scheduled warm-up.
-- A restock adds units to an item; its row is written in the same
-- transaction that adds them to item_stock, so a retry with the same
-- Idempotency-Key (unique per item) finds it and adds nothing again.
-- applied_at is set once Redis has the units too (or was not warmed, so a
-- warm-up loads them from item_stock); until then the reconciler counts
-- them as on their way to Redis and its repair finishes the Redis step.
CREATE TABLE restocks (
  id              BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  item_id         BIGINT      NOT NULL,
  idempotency_key VARCHAR(64) NOT NULL,
  quantity        INT         NOT NULL,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  applied_at      DATETIME(3) NULL,
  UNIQUE KEY uk_restocks_key (item_id, idempotency_key),
  KEY idx_restocks_pending (item_id, applied_at),
  CONSTRAINT chk_restocks_quantity CHECK (quantity > 0),
  CONSTRAINT fk_restocks_item FOREIGN KEY (item_id) REFERENCES items (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- When the activity's stock was last loaded into Redis (by the consumer's
-- schedule, SECKILL_WARMUP_LEAD before starts_at, or by hand); NULL: never.
ALTER TABLE activities
  ADD COLUMN warmed_at DATETIME(3) NULL,
  ADD KEY idx_activities_warmup (warmed_at, starts_at);
