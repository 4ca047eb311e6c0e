-- 0012: sales of several items (sizes, tiers, denominations).
-- A sale created with items lists them here, in the operator's order
-- (position 0 is activities.item_id, the sale's first item, whose Redis
-- hash tag every key of the sale shares); a sale created with item_id
-- alone has no rows and sells activities.item_id at activities.sale_price.
-- label is what buyers see; sale_price is the item's unit price in the
-- sale, in minor units, as in 0003. One live order per buyer per sale,
-- whatever its item, is uk_orders_live (activity_id, user_id, live).
CREATE TABLE activity_items (
  activity_id BIGINT      NOT NULL,
  item_id     BIGINT      NOT NULL,
  position    SMALLINT    NOT NULL,
  label       VARCHAR(40) NOT NULL,
  sale_price  BIGINT      NULL,
  currency    CHAR(3)     NULL,
  PRIMARY KEY (activity_id, item_id),
  UNIQUE KEY uk_activity_items_position (activity_id, position),
  KEY idx_activity_items_item (item_id),
  CONSTRAINT fk_activity_items_activity FOREIGN KEY (activity_id) REFERENCES activities (id),
  CONSTRAINT fk_activity_items_item FOREIGN KEY (item_id) REFERENCES items (id),
  CONSTRAINT chk_activity_items_price CHECK ((sale_price IS NULL AND currency IS NULL) OR (sale_price IS NOT NULL AND sale_price >= 0 AND currency IS NOT NULL))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
