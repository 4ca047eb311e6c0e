-- 0008: one order per Idempotency-Key, decided by MySQL.
-- Redis's idempotency record turns a retried key into the first order's
-- number, but Redis can lose it (brought back from an older state); the
-- retry then reserves a new order number, and uk_orders_live refuses it
-- only while the first order is live: after the first was CLOSED the
-- retry became a second order. key_once holds idempotency_key for every
-- status except FAILED and NULL for FAILED (NULLs never collide), so
-- uk_orders_key allows one order per (activity, user, key) that is or
-- was real, while FAILED rows (the API's 503 records, whose answer freed
-- the key for a new try, and the refusals) never block the key. The
-- consumer records an order this key refuses as FAILED
-- DUPLICATE_REQUEST. Like live (0001) it follows status on UPDATE too.
-- Existing rows are kept. A database that already holds two non-FAILED
-- orders of one (activity, user, key) (a retry after such a loss) makes
-- this ALTER fail with a duplicate-key error on uk_orders_key and change
-- nothing; the migration is then not recorded, and the programs do not
-- start until an operator has looked at each pair, found by
--   SELECT activity_id, user_id, idempotency_key, COUNT(*) FROM orders
--   WHERE status <> 'FAILED' GROUP BY 1, 2, 3 HAVING COUNT(*) > 1;
-- and set aside the later one's key (its stock and payments are real, so
-- nothing here changes it blindly).
ALTER TABLE orders
  ADD COLUMN key_once VARBINARY(64) AS (CASE WHEN status <> 'FAILED' THEN idempotency_key END) STORED,
  ADD UNIQUE KEY uk_orders_key (activity_id, user_id, key_once);
