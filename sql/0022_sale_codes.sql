-- 0022: presale codes (issue 45, item 1; docs/codes.md).
--
-- activities.access is whom the sale takes: 'open' (everyone),
-- 'code_required' (only requests carrying a code), 'code_priority' (a room
-- sale: code holders are admitted first).
ALTER TABLE activities
  ADD COLUMN access VARCHAR(16) NOT NULL DEFAULT 'open',
  ADD CONSTRAINT chk_activities_access CHECK (access IN ('open', 'code_required', 'code_priority'));

-- sale_codes: a sale's codes, by digest (access.Hash: an HMAC of the code
-- under the shared order number key; the code itself is never stored).
-- uses is how many orders or entries may hold the code at once; used is how
-- many live ones hold it: the consumer's transaction that creates an order
-- takes a use with a conditional update (used < uses), as it takes stock,
-- and the transaction that ends the order unsold gives it back, so MySQL
-- is the last word on a code as it is on stock. subject binds the code to
-- one buyer (NULL: anyone). revoked_at: refused from then on.
CREATE TABLE sale_codes (
  activity_id BIGINT                      NOT NULL,
  digest      CHAR(32) CHARACTER SET ascii NOT NULL,
  uses        INT                         NOT NULL,
  used        INT                         NOT NULL DEFAULT 0,
  subject     VARBINARY(512)              NULL,
  revoked_at  DATETIME(3)                 NULL,
  created_at  DATETIME(3)                 NOT NULL,
  PRIMARY KEY (activity_id, digest),
  CONSTRAINT chk_sale_codes_used CHECK (used >= 0 AND used <= uses),
  CONSTRAINT fk_sale_codes_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE=InnoDB;

-- The code an order or an entry used (its digest), NULL for none: the
-- close that ends an order unsold gives this code's use back.
ALTER TABLE orders ADD COLUMN access_code CHAR(32) CHARACTER SET ascii NULL;
ALTER TABLE draw_entries ADD COLUMN access_code CHAR(32) CHARACTER SET ascii NULL;

-- sale_code_batches: a request that added codes under an Idempotency-Key,
-- so the same request sent again (its answer was lost) is answered from it
-- and adds nothing: a generated batch's codes are derived from its nonce
-- under the shared order number key (access.Derive), so the nonce here
-- tells no one a code; fingerprint is a digest of the request, refusing the
-- key sent with another one. A request without a key keeps no row.
CREATE TABLE sale_code_batches (
  activity_id BIGINT                       NOT NULL,
  idem_key    VARCHAR(64) CHARACTER SET ascii NOT NULL,
  kind        VARCHAR(8)                   NOT NULL,
  nonce       VARBINARY(16)                NULL,
  count       INT                          NOT NULL,
  uses        INT                          NOT NULL,
  fingerprint CHAR(64) CHARACTER SET ascii NOT NULL,
  created_by  VARBINARY(512)               NOT NULL,
  created_at  DATETIME(3)                  NOT NULL,
  PRIMARY KEY (activity_id, idem_key),
  CONSTRAINT chk_sale_code_batches_kind CHECK (kind IN ('generate', 'import')),
  CONSTRAINT fk_sale_code_batches_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE=InnoDB;
