-- 0021: the operator's live control of a waiting room during its sale, and
-- the record of every operator action on a sale (issue 45, item 2).
--
-- paused stops admissions (nobody's place moves, the rate's clock gains no
-- credit meanwhile); passthrough admits everyone in turn as fast as the
-- units left allow; never both. control_version counts the changes of
-- admit_per_second, paused and passthrough: Redis holds the live values
-- with the version they came from (the room's "ctl" hash), and a value of
-- a lower version never replaces one of a higher, whichever writer (the
-- operator's change, an api instance's copy of the sale, a rebuild of the
-- room from this row) comes second.
ALTER TABLE activity_rooms
  ADD COLUMN paused          BOOLEAN NOT NULL DEFAULT FALSE,
  ADD COLUMN passthrough     BOOLEAN NOT NULL DEFAULT FALSE,
  ADD COLUMN control_version BIGINT  NOT NULL DEFAULT 0,
  ADD CONSTRAINT chk_activity_rooms_control CHECK (NOT (paused AND passthrough));

-- sale_audit: one row per operator action on a sale, written in the
-- transaction of the action itself, so an action is recorded if and only
-- if it took effect. subject is the operator's token's subject; detail is
-- the action's values as JSON (for a room change: the room's settings
-- after it). id orders the rows (the audit lists them newest first).
CREATE TABLE sale_audit (
  id          BIGINT         NOT NULL AUTO_INCREMENT,
  activity_id BIGINT         NOT NULL,
  action      VARCHAR(32)    NOT NULL,
  subject     VARBINARY(512) NOT NULL,
  detail      TEXT           NOT NULL,
  at          DATETIME(3)    NOT NULL,
  PRIMARY KEY (id),
  KEY ix_sale_audit_activity (activity_id, id),
  CONSTRAINT fk_sale_audit_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
