-- 0017: a waiting room's joins, kept in MySQL so a room Redis lost (emptied,
-- restarted empty, brought back from an older copy) is rebuilt with every
-- buyer who was told a place, in the order they were told it (ADR 0005).
-- A join is written here before its answer goes out. gen is the room's
-- generation in Redis the join was answered in: activity_rooms.gen counts
-- the rebuilds, and a rebuilt room is generation gen + 1. seq is the late
-- joiner's sequence number in that generation, NULL for a buyer who joined
-- before the start (their place is their rank under the room's seed, which
-- the rebuild computes again). The rebuild orders late joiners by (gen,
-- seq): a generation's joins all came after the previous one's. Two
-- buyers never hold one (gen, seq): a Redis brought back from an older copy
-- hands out a number again, and the second buyer's join is refused
-- (uk_room_joins_place) and rebuilds the room instead of being told it.
-- No foreign key to activity_rooms: its check would share-lock the room's
-- row, which a rebuild holds for update while it waits for the joins in
-- flight to land.
CREATE TABLE room_joins (
  activity_id BIGINT         NOT NULL,
  user_id     VARBINARY(512) NOT NULL,
  gen         INT            NOT NULL,
  seq         BIGINT         NULL,
  joined_at   DATETIME(3)    NOT NULL,
  PRIMARY KEY (activity_id, user_id),
  UNIQUE KEY uk_room_joins_place (activity_id, gen, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- rebuilt_at is when the room was last built in Redis: a repair after a
-- loss seen at some time skips a room already rebuilt since.
ALTER TABLE activity_rooms ADD COLUMN gen INT NOT NULL DEFAULT 0, ADD COLUMN rebuilt_at DATETIME(3) NULL;
