-- 0016: a draw row inserted without its commitment gets it from its seed.
-- A program of the version before 0015, still running during a rolling
-- upgrade, makes draw sales without the column (0015 made it NOT NULL with
-- no default, and that insert failed: a 500 to the operator). The empty
-- default lets such an insert through and the trigger fills the commitment
-- in before the row is written, so the row is the same as one this version
-- writes; activity_draws_fixed still refuses any later change of either.
ALTER TABLE activity_draws MODIFY commitment CHAR(64) NOT NULL DEFAULT '';

DELIMITER //
CREATE TRIGGER activity_draws_commitment BEFORE INSERT ON activity_draws FOR EACH ROW
BEGIN
  IF NEW.commitment = '' THEN
    SET NEW.commitment = SHA2(NEW.seed, 256);
  END IF;
END//
DELIMITER ;
