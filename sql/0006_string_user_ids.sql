-- 0006: a user id is the identity provider's subject, any string of 1-128
-- characters ("1001", "f3a1c9e2-...", "auth0|65ab..."), no longer a number.
-- The numbers already stored become their decimal strings, which is what
-- the same buyers' tokens carry, so their orders, live-order key and order
-- lists stay theirs. VARBINARY compares bytes: no collation folds case or
-- pads trailing spaces, so subjects that differ only so are different users
-- (in uk_orders_live too). 512 bytes hold 128 characters of UTF-8.
-- uk_orders_live (activity_id, user_id, live) and idx_orders_user
-- (user_id, id) are rebuilt on the new column and keep their meaning.
ALTER TABLE orders MODIFY user_id VARBINARY(512) NOT NULL;
