-- 0003: prices and the buyer's order list.
-- Every price is an integer of the currency's minor units (cents, yen) with
-- its ISO 4217 code; NULL means no price was recorded (rows made before this
-- file, or items created without one), and the API leaves such fields out.

ALTER TABLE items
  ADD COLUMN price    BIGINT  NULL,
  ADD COLUMN currency CHAR(3) NULL,
  ADD CONSTRAINT chk_items_price CHECK ((price IS NULL AND currency IS NULL) OR (price IS NOT NULL AND price >= 0 AND currency IS NOT NULL));

-- The sale's unit price, in the item's currency; set from the item's price
-- when the operator gives none.
ALTER TABLE activities
  ADD COLUMN sale_price BIGINT  NULL,
  ADD COLUMN currency   CHAR(3) NULL,
  ADD CONSTRAINT chk_activities_price CHECK ((sale_price IS NULL AND currency IS NULL) OR (sale_price IS NOT NULL AND sale_price >= 0 AND currency IS NOT NULL));

-- What the order cost when it was written: amount = unit_price * quantity.
-- idx_orders_user serves GET /api/v1/orders: one user's orders, newest
-- (highest id) first, by keyset.
ALTER TABLE orders
  ADD COLUMN unit_price BIGINT  NULL,
  ADD COLUMN amount     BIGINT  NULL,
  ADD COLUMN currency   CHAR(3) NULL,
  ADD KEY idx_orders_user (user_id, id),
  ADD CONSTRAINT chk_orders_price CHECK ((unit_price IS NULL AND amount IS NULL AND currency IS NULL)
    OR (unit_price IS NOT NULL AND unit_price >= 0 AND amount IS NOT NULL AND amount = unit_price * quantity
        AND currency IS NOT NULL));
