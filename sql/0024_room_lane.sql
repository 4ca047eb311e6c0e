-- 0024: the priority lane of a code_priority sale's waiting room. A buyer
-- who joins with a valid presale code is in the lane (admitted before the
-- line) and their place holds one use of the code until an order takes it
-- over or the admission expires unused. The join's record keeps the code's
-- digest so a room rebuilt from MySQL (after Redis lost it) has its lane
-- again, in the same order, and the places that still hold a use hold it
-- again.
ALTER TABLE room_joins ADD COLUMN access_code CHAR(32) CHARACTER SET ascii NULL;
