-- 0018: the outbox of the events the shop hears (issue 43, docs/events.md).
-- A service writes each event in the same transaction as the change it
-- reports, so an event exists exactly when its change committed. stream is
-- what the event is about (an order number), seq counts that stream's
-- events from 1 (uk_outbox_stream: one event per (stream, seq), so two
-- writers never give one order's events the same place), and event_id is
-- the id the shop deduplicates by: stable across every retry because it is
-- written once, here. created_at is MySQL's clock inside the transaction.
-- shard (a hash of stream) splits the rows among relays; published_at is
-- when a relay had Kafka take the event.
CREATE TABLE outbox_events (
  id           BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
  event_id     VARCHAR(128)   NOT NULL,
  stream       VARCHAR(96)    NOT NULL,
  seq          INT            NOT NULL,
  type         VARCHAR(32)    NOT NULL,
  data         JSON           NOT NULL,
  shard        SMALLINT       NOT NULL,
  created_at   DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  published_at DATETIME(6)    NULL,
  UNIQUE KEY uk_outbox_event (event_id),
  UNIQUE KEY uk_outbox_stream (stream, seq),
  KEY ix_outbox_unpublished (published_at, shard, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per shard: a relay holds a shard's row (FOR UPDATE SKIP LOCKED)
-- while it publishes the shard's events and marks them, so relays share
-- the shards and one order's events are relayed by one relay at a time,
-- in order.
CREATE TABLE outbox_shards (
  shard SMALLINT NOT NULL PRIMARY KEY
) ENGINE=InnoDB;

INSERT INTO outbox_shards (shard)
  WITH RECURSIVE s (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 63)
  SELECT n FROM s;

-- event_seq is the seq of the order's last event: the transaction that
-- changes an order holds its row, so it numbers the order's next event
-- with no other lock. An order written with its first event has 1.
ALTER TABLE orders ADD COLUMN event_seq INT NOT NULL DEFAULT 0;
