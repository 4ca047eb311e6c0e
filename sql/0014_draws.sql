-- 0014: draw sales (opt-in; a sale without an activity_draws row is first come).
-- activity_draws: when entries close, the secret seed (its SHA-256 is shown
-- from the sale's making, the seed itself once drawn), the draw's state
-- (OPEN, then DRAWN; CLOSED is OPEN past entries_close_at), the count of
-- entries, and what the draw fixed: the frozen list's digest and each size's
-- stock at the draw (JSON, [{"item_id":…,"stock":…}]).
CREATE TABLE activity_draws (
  activity_id      BIGINT      NOT NULL,
  entries_close_at DATETIME(3) NOT NULL,
  seed             BINARY(32)  NOT NULL,
  state            VARCHAR(8)  NOT NULL DEFAULT 'OPEN',
  entries          BIGINT      NOT NULL DEFAULT 0,
  entries_digest   CHAR(64)    NULL,
  sizes            TEXT        NULL,
  drawn_at         DATETIME(3) NULL,
  PRIMARY KEY (activity_id),
  CONSTRAINT fk_activity_draws_activity FOREIGN KEY (activity_id) REFERENCES activities (id),
  CONSTRAINT chk_activity_draws_state CHECK (state IN ('OPEN', 'DRAWN'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- draw_entries: one entry a buyer a sale (the api writes them, before the
-- draw only).
CREATE TABLE draw_entries (
  entry_id    BINARY(32)     NOT NULL,
  activity_id BIGINT         NOT NULL,
  user_id     VARBINARY(512) NOT NULL,
  item_id     BIGINT         NOT NULL,
  quantity    INT            NOT NULL,
  created_at  DATETIME(3)    NOT NULL,
  PRIMARY KEY (entry_id),
  UNIQUE KEY uk_draw_entries_buyer (activity_id, user_id),
  CONSTRAINT fk_draw_entries_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- draw_results: the ranking, written by the draw in the transaction that
-- sets the draw DRAWN (so it is all there or not at all). order_no is the
-- order made for the entry: a winner's, or an alternate's the stock came
-- back to; it is set before the order is reserved, so an entry has one
-- order at most, and issued once its event reached Kafka. alternate is an
-- alternate's place among its size's alternates (1, 2, ...): its place in
-- line now is that less the alternates before it given orders since, which
-- idx_draw_results_size reads without the ones still waiting.
CREATE TABLE draw_results (
  activity_id BIGINT         NOT NULL,
  draw_rank   INT            NOT NULL,
  entry_id    BINARY(32)     NOT NULL,
  item_id     BIGINT         NOT NULL,
  quantity    INT            NOT NULL,
  user_id     VARBINARY(512) NOT NULL,
  outcome     VARCHAR(9)     NOT NULL,
  alternate   INT            NULL,
  order_no    VARBINARY(48)  NULL,
  issued      TINYINT(1)     NOT NULL DEFAULT 0,
  PRIMARY KEY (activity_id, draw_rank),
  UNIQUE KEY uk_draw_results_entry (entry_id),
  UNIQUE KEY uk_draw_results_order (order_no),
  KEY idx_draw_results_size (activity_id, item_id, outcome, order_no, draw_rank),
  CONSTRAINT chk_draw_results_outcome CHECK (outcome IN ('WON', 'ALTERNATE'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
