-- 0020: a draw entry's events after its outcome (issue 43, docs/events.md):
-- entry.promoted (an alternate's order committed CREATED) and
-- entry.not_selected (the sale ended and the alternate got no order).
--
-- event_seq is the seq of the entry's last event, as orders.event_seq is an
-- order's: the transaction that writes an entry's event holds its ranking
-- row, so it numbers the next event with no other lock. The draw writes
-- each row with its entry's first event (entry.won or entry.alternate,
-- seq 1), hence the default, which also fits a row that a program of the
-- version before this file writes during a rolling upgrade (it writes the
-- same first event). Rows already here count the events the outbox holds
-- of their entry: 1 since 0018, none before.
ALTER TABLE draw_results ADD COLUMN event_seq INT NOT NULL DEFAULT 1;

UPDATE draw_results r SET r.event_seq = COALESCE((SELECT MAX(e.seq) FROM outbox_events e
  WHERE e.stream = CONCAT('entry_', CONVERT(r.entry_id USING utf8mb4))), 0);

-- not_selected: the alternate's entry.not_selected is written (in the same
-- transaction). It is final: the drawer numbers no order for such an entry
-- any more (Draws.NumberPick), and it is set only on an alternate without
-- an order or whose order MySQL recorded FAILED, under the row's lock.
-- idx_draw_results_open reads a sale's alternates still without their last
-- event, in rank order, past the ones marked: after the end, the promoted
-- ones and those whose order is on its way (few), not the whole ranking.
ALTER TABLE draw_results ADD COLUMN not_selected TINYINT(1) NOT NULL DEFAULT 0,
  ADD KEY idx_draw_results_open (activity_id, outcome, not_selected, draw_rank);

-- settled_at: when every alternate of the ended sale had its last event
-- (entry.promoted, or entry.not_selected): the drawer's pass no longer
-- looks at the draw. NULL while the sale runs, or while an alternate's
-- order is still on its way to MySQL.
ALTER TABLE activity_draws ADD COLUMN settled_at DATETIME(3) NULL;
