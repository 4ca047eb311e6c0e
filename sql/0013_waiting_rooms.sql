-- 0013: a sale's waiting room (opt-in; a sale without a row has none).
-- admit_per_second and admission_ttl_seconds pace the admissions;
-- proof_of_work_bits is the join challenge's difficulty (0: none);
-- opens_at is when buyers may join (NULL: from the sale's creation).
-- seed orders the buyers who joined before the start (its SHA-256 is shown
-- from the room's making, the seed itself from the start); admission_key
-- signs the admissions and never leaves the database and the api.
CREATE TABLE activity_rooms (
  activity_id           BIGINT      NOT NULL,
  admit_per_second      INT         NOT NULL,
  admission_ttl_seconds INT         NOT NULL,
  proof_of_work_bits    TINYINT     NOT NULL DEFAULT 0,
  opens_at              DATETIME(3) NULL,
  seed                  BINARY(32)  NOT NULL,
  admission_key         BINARY(32)  NOT NULL,
  PRIMARY KEY (activity_id),
  CONSTRAINT fk_activity_rooms_activity FOREIGN KEY (activity_id) REFERENCES activities (id),
  CONSTRAINT chk_activity_rooms_settings CHECK (admit_per_second BETWEEN 1 AND 100000
    AND admission_ttl_seconds BETWEEN 10 AND 3600 AND proof_of_work_bits BETWEEN 0 AND 24)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
