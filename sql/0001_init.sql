-- 0001: items, stock, activities and orders.
-- Table and column names are part of the operator contract.

CREATE TABLE items (
  id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name       VARCHAR(200) NOT NULL,
  created_at DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The final truth for stock: the consumer takes units with
-- UPDATE item_stock SET stock = stock - n WHERE item_id = ? AND stock >= n.
CREATE TABLE item_stock (
  item_id    BIGINT      NOT NULL PRIMARY KEY,
  stock      INT         NOT NULL,
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  CONSTRAINT chk_item_stock_nonneg CHECK (stock >= 0),
  CONSTRAINT fk_item_stock_item FOREIGN KEY (item_id) REFERENCES items (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE activities (
  id                     BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  item_id                BIGINT      NOT NULL,
  starts_at              DATETIME(3) NOT NULL,
  ends_at                DATETIME(3) NOT NULL,
  per_user_limit         INT         NOT NULL DEFAULT 1,
  payment_window_seconds INT         NULL,
  created_at             DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  KEY idx_activities_item (item_id),
  CONSTRAINT chk_activities_window CHECK (ends_at > starts_at),
  CONSTRAINT chk_activities_limit CHECK (per_user_limit >= 1),
  CONSTRAINT fk_activities_item FOREIGN KEY (item_id) REFERENCES items (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- status holds the API's words: CREATED, PAID, CLOSED, FAILED.
-- live is 1 for CREATED and PAID and NULL otherwise, so the unique key
-- uk_orders_live allows at most one live order per (activity, user) while
-- CLOSED and FAILED orders never block the user's next attempt.
CREATE TABLE orders (
  id              BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_no        VARCHAR(48) NOT NULL,
  user_id         BIGINT      NOT NULL,
  item_id         BIGINT      NOT NULL,
  activity_id     BIGINT      NOT NULL,
  quantity        INT         NOT NULL,
  status          VARCHAR(16) NOT NULL,
  failure_reason  VARCHAR(64) NULL,
  idempotency_key VARCHAR(64) NOT NULL,
  live            TINYINT AS (CASE WHEN status IN ('CREATED', 'PAID') THEN 1 END) STORED,
  pay_deadline    DATETIME(3) NULL,
  released_at     DATETIME(3) NULL,
  reserved_at     DATETIME(3) NOT NULL,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  UNIQUE KEY uk_orders_order_no (order_no),
  UNIQUE KEY uk_orders_live (activity_id, user_id, live),
  KEY idx_orders_item_status (item_id, status),
  KEY idx_orders_deadline (status, pay_deadline),
  CONSTRAINT chk_orders_quantity CHECK (quantity > 0),
  CONSTRAINT chk_orders_status CHECK (status IN ('CREATED', 'PAID', 'CLOSED', 'FAILED'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
