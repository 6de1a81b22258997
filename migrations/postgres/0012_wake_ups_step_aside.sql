-- QueueBox 0012: an insert that notified nobody keeps the wake-up lock shared until its transaction ends, so a
-- listener can step aside under load and take the lock back without missing a row. Under 0011 a local runtime's
-- listener held the channel's lock all the time it listened, so every transaction of the application that
-- enqueued sent a notification and committed one after the other, server-wide (async.c, PreCommit_Notify): ten
-- connections that each insert a business row and enqueue committed 2,978 transactions/s with the listener against
-- 4,338 without it. The runtime now lets go of the outbox channel's lock while inserts arrive faster than a
-- notification is worth (its drain then polls every few milliseconds), and takes it back once they slow down.
--
-- Taking it back must not lose a wake-up: a transaction whose insert found the lock free sent nothing, and it may
-- commit after the listener took the lock and after its next claim. 0011's trigger took the lock shared for an
-- instant and gave it back; this one takes it shared for the rest of the transaction
-- (pg_try_advisory_xact_lock_shared, given back at commit or rollback, a cancel included). The listener's exclusive
-- pg_try_advisory_lock therefore succeeds only once every transaction that notified nobody has ended, and the claim
-- it runs next sees their rows; every insert after it notifies. Shared takers never wait for each other, and an
-- insert never waits for the listener (a try). A transaction holds the shared lock of each channel it inserted into
-- at most once (re-entrant), and no session lock is ever left behind by a cancel.
--
-- The statement changes the catalog only, as 0010 and 0011 did: inserts running meanwhile go on. A runtime of an
-- older version holds the lock all the time it listens, and the triggers notify it as before. Names are unqualified:
-- the migrator sets search_path to the configured schema.

CREATE OR REPLACE FUNCTION queuebox_notify_insert() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  IF pg_catalog.current_setting('queuebox.wake_ups', true) = 'always' THEN
    PERFORM pg_catalog.pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA::text);
    RETURN NULL;
  END IF;
  -- Free: nobody listens (or the listener stepped aside). Held shared until this transaction ends, so a listener
  -- taking the lock afterwards knows that this transaction's rows are committed (or gone) by then.
  IF pg_catalog.pg_try_advisory_xact_lock_shared(
    pg_catalog.hashtextextended('queuebox.wake-ups:' || TG_TABLE_SCHEMA || ':' || TG_ARGV[0], 0)
  ) THEN
    RETURN NULL;
  END IF;
  -- TG_ARGV[0] is the channel; the payload names the schema, so listeners of other schemas ignore it.
  PERFORM pg_catalog.pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA::text);
  RETURN NULL;
END
$$;
