-- 0015: a draw's commitment is stored apart from its seed, written once
-- when the sale is made (SHA-256 of the seed, in hex) and published from
-- there, so a seed changed later no longer matches what buyers were shown.
-- Draws made before this file get theirs from their seed as it stands.
ALTER TABLE activity_draws ADD COLUMN commitment CHAR(64) NULL AFTER seed;

UPDATE activity_draws SET commitment = SHA2(seed, 256) WHERE commitment IS NULL;

ALTER TABLE activity_draws MODIFY commitment CHAR(64) NOT NULL;

-- MySQL itself refuses a change of either, whoever asks (an operator's own
-- UPDATE included): the commitment is fixed when the sale is made, and the
-- seed is what it commits to (no code path updates it; a draw that must
-- take another seed is another sale). The migration runner, like the
-- mysql client, reads DELIMITER lines.
DELIMITER //
CREATE TRIGGER activity_draws_fixed BEFORE UPDATE ON activity_draws FOR EACH ROW
BEGIN
  IF NOT (NEW.commitment <=> OLD.commitment) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'activity_draws.commitment is fixed when the sale is made';
  END IF;
  IF NOT (NEW.seed <=> OLD.seed) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'activity_draws.seed never changes: the published commitment is to it';
  END IF;
END//
DELIMITER ;
