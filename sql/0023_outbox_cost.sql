-- 0023: what the outbox and the webhook deliveries cost MySQL per event
-- (issue 43 item 6, bench/JOURNAL.md).
--
-- uk_outbox_event goes: an event's id is evt_<stream>_<seq>
-- (outbox.IDOf), written by nothing else, and the seq is the digits after
-- the id's last "_", so two ids are equal exactly when their (stream,
-- seq) are; uk_outbox_stream already makes those unique. Readers find an
-- event by (stream, seq).
ALTER TABLE outbox_events DROP INDEX uk_outbox_event;

-- A delivery is unique per (endpoint, stream, seq), the same as per
-- (endpoint, event id) for the reason above, and that one key also finds a
-- stream's pending deliveries in seq order (the second key went, with the
-- state it carried: marking a delivery delivered changes one key, not two).
-- A delivery's last try is kept on it (last_at, last_ms, with last_status
-- and last_error): a delivery that succeeds at its first try writes no
-- attempt row; webhook_attempts holds the tries that failed.
ALTER TABLE webhook_deliveries
  DROP INDEX uk_webhook_delivery,
  DROP INDEX ix_webhook_delivery_stream,
  ADD UNIQUE KEY uk_webhook_delivery (webhook_id, stream, seq),
  ADD COLUMN last_at DATETIME(6) NULL,
  ADD COLUMN last_ms INT NOT NULL DEFAULT 0;
