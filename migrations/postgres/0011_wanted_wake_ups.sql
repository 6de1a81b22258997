-- QueueBox 0011: a wake-up is sent only while someone listens for it. The insert triggers of 0002 (pinned in 0010)
-- sent NOTIFY on every insert statement into outbox and inbox. PostgreSQL serialises the commits of all
-- transactions that sent a notification, server-wide and across the WAL flush (async.c, PreCommit_Notify: a lock on
-- "database 0" held until after commit), so every transaction of the application that enqueued committed one after
-- the other, whether or not anybody listened: on AWS nobody does (the drains are woken by EventBridge and by the
-- functions themselves), and ten connections that each insert a business row and enqueue committed 1,851
-- transactions/s here with the trigger against 3,880 without it.
--
-- Now the trigger notifies only when the inserting session sets queuebox.wake_ups to 'always' (the embedded PGlite
-- of the local runtime, one session for everything) or when some session holds the channel's advisory lock,
-- pg_advisory_lock(pg_catalog.hashtextextended('queuebox.wake-ups:<schema>:<channel>', 0)): the local runtime's
-- wake-up listener holds the locks of both channels while it listens, and so may any other listener that wants
-- these notifications. The trigger learns whether the lock is held by taking it shared for an instant and giving it
-- back (an exclusive holder makes that fail); shared takers never wait for each other, and the listener never waits
-- for them. A cancel between the take and the give-back gives it back too (a session lock outlives the transaction).
-- The check runs at the end of the insert statement, not at commit.
--
-- The statement changes the catalog only, as 0010 did: inserts running meanwhile go on. A local runtime of an older
-- version takes no lock, so until it is upgraded it hears nothing and its drains poll (outbox.pollIntervalMs,
-- inbox.relay.pollIntervalMs). Names are unqualified: the migrator sets search_path to the configured schema.

CREATE OR REPLACE FUNCTION queuebox_notify_insert() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  -- TG_ARGV[0] is the channel; the payload names the schema, so listeners of other schemas ignore it.
  wanted bigint := pg_catalog.hashtextextended('queuebox.wake-ups:' || TG_TABLE_SCHEMA || ':' || TG_ARGV[0], 0);
  free boolean := false;
BEGIN
  IF pg_catalog.current_setting('queuebox.wake_ups', true) = 'always' THEN
    PERFORM pg_catalog.pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA::text);
    RETURN NULL;
  END IF;
  BEGIN
    free := pg_catalog.pg_try_advisory_lock_shared(wanted);
    IF free THEN
      -- Nobody holds the lock: nobody listens. Given back at once, so it is never held past this statement.
      free := NOT pg_catalog.pg_advisory_unlock_shared(wanted);
      RETURN NULL;
    END IF;
  EXCEPTION WHEN query_canceled OR OTHERS THEN
    -- A cancel (statement_timeout, pg_cancel_backend) that lands between the two calls: a session lock outlives
    -- the rolled-back transaction, and one left held would keep every listener from ever taking the lock.
    -- (OTHERS alone does not catch a cancel.)
    IF free THEN
      PERFORM pg_catalog.pg_advisory_unlock_shared(wanted);
    END IF;
    RAISE;
  END;
  PERFORM pg_catalog.pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA::text);
  RETURN NULL;
END
$$;
