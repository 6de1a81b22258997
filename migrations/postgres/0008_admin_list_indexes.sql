-- QueueBox 0008 (mirrors migrations/sqlserver/0008_admin_list_indexes.sql by number and name): the index of the
-- admin list page that had none. A page is the next rows in ascending id after its cursor; a page of one state read
-- the primary key from the cursor on and skipped the rows of every other state (store-postgres/src/admin-sql.ts,
-- adminListStatement).
-- outbox_unknown_state, inbox_unknown_state: rows whose state literal this version does not know (a newer version
-- wrote them; the admin lists them as Failed). A NOT IN is no index condition, and the page read every row (33,281
-- buffers, 0.36 s at 2,000,000; now 1). No row this version writes ever enters them.
-- Pending rows get no index here: one in id order would be one more index entry for every row stored, retried or
-- requeued (about 11% fewer rows per second inserted into the outbox, pgbench), for an operator's page. Their page
-- reads the claims' indexes (outbox_due_unkeyed, outbox_active_key, inbox_due) instead. Processing rows are few and
-- are read from the lease indexes, then sorted; dead rows have outbox_dead and inbox_dead (0007); sent rows are most
-- of the table and are read along the primary key.
-- The indexes are built inside the migration's transaction (as in 0004), which blocks writes to the tables for one
-- scan of each. Names are unqualified: the migrator sets search_path to the configured schema.

CREATE INDEX outbox_unknown_state ON outbox (id) WHERE state NOT IN ('pending', 'processing', 'sent', 'dead');
CREATE INDEX inbox_unknown_state ON inbox (id) WHERE state NOT IN ('pending', 'processing', 'processed', 'dead');
