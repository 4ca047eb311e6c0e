-- 0019: the shop's webhook endpoints and the deliveries of the outbox's
-- events to them (issue 43, docs/events.md). No foreign keys: the relay
-- writes deliveries in the unit that holds an outbox shard, and a key's
-- check would lock the endpoint's row the dispatcher updates; deleting an
-- endpoint deletes its rows in one unit.
--
-- webhooks: an endpoint the operator registered, the event types it wants
-- (patterns such as "order.*"), and whether it is on. disabled_reason says
-- who turned it off ("operator", or "failing" when it failed for a day).
-- failing_since is when its current run of failures began (NULL while it
-- answers). lease_owner/lease_until: the dispatcher that delivers to it
-- now (one at a time per endpoint, so each order's events go in order).
CREATE TABLE webhooks (
  id              BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
  url             VARCHAR(2048) NOT NULL,
  events          JSON          NOT NULL,
  description     VARCHAR(255)  NOT NULL DEFAULT '',
  enabled         TINYINT(1)    NOT NULL DEFAULT 1,
  disabled_reason VARCHAR(16)   NOT NULL DEFAULT '',
  disabled_at     DATETIME(6)   NULL,
  failing_since   DATETIME(6)   NULL,
  lease_owner     VARCHAR(64)   NOT NULL DEFAULT '',
  lease_until     DATETIME(6)   NULL,
  created_at      DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- An endpoint's signing secrets: one, or two while a rotation overlaps
-- (the old one has expires_at; both sign until then).
CREATE TABLE webhook_secrets (
  id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  webhook_id BIGINT       NOT NULL,
  secret     VARCHAR(128) NOT NULL,
  created_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at DATETIME(6)  NULL,
  KEY ix_webhook_secrets (webhook_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per (endpoint, event): written by the relay in the unit that
-- marks the event published (uk_webhook_delivery: never twice), sent by
-- the dispatcher. state: pending, delivered, or failed (gave up after the
-- retry schedule). A pending row is sent only when it is its stream's
-- first pending row (ix_webhook_delivery_stream), so an order's events
-- reach the endpoint in seq order. next_at: when it may be tried next.
CREATE TABLE webhook_deliveries (
  id           BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
  webhook_id   BIGINT        NOT NULL,
  event_id     VARCHAR(128)  NOT NULL,
  stream       VARCHAR(96)   NOT NULL,
  seq          INT           NOT NULL,
  state        VARCHAR(16)   NOT NULL DEFAULT 'pending',
  attempts     INT           NOT NULL DEFAULT 0,
  next_at      DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  last_status  INT           NOT NULL DEFAULT 0,
  last_error   VARCHAR(512)  NOT NULL DEFAULT '',
  created_at   DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  delivered_at DATETIME(6)   NULL,
  UNIQUE KEY uk_webhook_delivery (webhook_id, event_id),
  KEY ix_webhook_delivery_due (webhook_id, state, next_at),
  KEY ix_webhook_delivery_stream (webhook_id, stream, state, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Every attempt to send a delivery: when, how long, the endpoint's status
-- (0: no answer) and the error.
CREATE TABLE webhook_attempts (
  id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  delivery_id BIGINT       NOT NULL,
  at          DATETIME(6)  NOT NULL,
  duration_ms INT          NOT NULL,
  status      INT          NOT NULL,
  error       VARCHAR(512) NOT NULL DEFAULT '',
  KEY ix_webhook_attempts (delivery_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
