-- 0011: the consumer's periodic passes read only what is due.
-- Each pass runs every second or two, whatever the database holds; without
-- these an idle pass read every CLOSED order (ReleasesDue: status is the
-- only prefix idx_orders_deadline gives it) and the whole orders table
-- (CancelledUnpaid: the join sorted by id scanned the primary key), so an
-- idle consumer cost in proportion to the orders of every past sale.
-- idx_orders_release makes "CLOSED, release not recorded, closed before t"
-- one range holding only the closes whose Redis release is unfinished;
-- idx_activities_cancelled lists the cancelled sales without reading the
-- others, and idx_orders_activity_status finds a cancelled sale's CREATED
-- orders (in id order: InnoDB appends the primary key) without reading
-- its others;
-- idx_activities_unwarmed finds the sales not warmed up that have not
-- ended, not every past sale that never was.
ALTER TABLE orders
  ADD KEY idx_orders_release (status, released_at, updated_at),
  ADD KEY idx_orders_activity_status (activity_id, status);

ALTER TABLE activities
  ADD KEY idx_activities_unwarmed (warmed_at, ends_at),
  ADD KEY idx_activities_cancelled (cancelled_at);
