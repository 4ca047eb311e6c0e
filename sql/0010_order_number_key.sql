-- 0010: secrets the programs share through MySQL, by name. The api signs
-- the order numbers it issues with the row 'order_number' (32 random bytes
-- that the first api to start inserts, see orderdb.DB.OrderNumberKey), so
-- every instance can tell a number one of them issued from one never issued.
CREATE TABLE IF NOT EXISTS shared_keys (
  name  VARCHAR(64)    NOT NULL PRIMARY KEY,
  value VARBINARY(255) NOT NULL
);
