-- 0002: split a hot item's Redis stock into buckets on different cluster
-- slots (docs/adr/0002-stock-buckets.md). MySQL keeps one stock row; the
-- number of buckets is a property of the activity. 1 means no buckets.

ALTER TABLE activities
  ADD COLUMN stock_buckets INT NOT NULL DEFAULT 1,
  ADD CONSTRAINT chk_activities_buckets CHECK (stock_buckets BETWEEN 1 AND 16);
