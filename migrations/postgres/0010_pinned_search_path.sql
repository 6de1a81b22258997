-- QueueBox 0010: the wake-up trigger's function resolves its built-ins in pg_catalog only. 0002's
-- queuebox_notify_insert() called pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA) unqualified and had no search_path of its
-- own, so it ran with the search_path of the role that inserted (the application's, on every enqueue; QueueBox's on
-- the relay's forward and the inbox). TG_TABLE_SCHEMA is of type name and the built-in takes (text, text), so a
-- pg_notify(text, name) in any schema on that search_path matched better and ran instead, as the inserting role: it
-- could do whatever that role may, and the wake-up was lost (an outside audit). On PostgreSQL 14, and databases
-- upgraded from it, public is writable by every role and on the default search_path. The function now calls
-- pg_catalog.pg_notify with a text argument and carries SET search_path = pg_catalog, pg_temp (pg_temp last, so a
-- temporary object cannot shadow anything either). Its notifications are unchanged: same channel, same payload.
-- The statement changes the catalog only (one row of pg_proc, replaced in place: the triggers keep pointing at it):
-- no table is rewritten or locked, and inserts running meanwhile go on; each session uses the new definition from
-- its next insert. Names are unqualified: the migrator sets search_path to the configured schema.

CREATE OR REPLACE FUNCTION queuebox_notify_insert() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  -- TG_ARGV[0] is the channel; the payload names the schema, so listeners of other schemas ignore it.
  PERFORM pg_catalog.pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA::text);
  RETURN NULL;
END
$$;
