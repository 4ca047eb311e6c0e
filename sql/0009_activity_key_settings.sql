-- 0009: when a sale's settings that its Redis keys are laid out and timed
-- by (stock_buckets, ends_at) last changed (PATCH), by MySQL's clock; NULL:
-- never since it was created. A warm-up through the API waits until every
-- instance's copy of the sale is younger than the change
-- (order.SettingsGuard), so it never lays out or times the keys by the old
-- settings. Existing rows keep NULL.
ALTER TABLE activities
  ADD COLUMN key_settings_changed_at DATETIME(3) NULL;
