import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Capture } from './capture.ts';
import {
  dispatchNotification,
  INBOX_CHANNEL,
  OUTBOX_CHANNEL,
  type WakeCallbacks,
  type WakeTarget,
  wakeBoth,
  wakeUpLockName,
} from './channels.ts';

/** What a PostgreSQL capture was doing when something failed. */
export type PostgresCaptureStep = 'connect' | 'connection' | 'check' | 'lock';

/** Options of {@link createPostgresCapture}. */
export interface PostgresCaptureOptions extends WakeCallbacks {
  /**
   * Connection string of the listening connection (`database.listenUrl`, else `database.url`). It must reach the
   * server directly or through a session-mode pooler: a transaction-mode pooler drops notifications.
   */
  readonly url: string;
  /**
   * Connection string the probe notification is sent through: the path the application's inserts take
   * (`database.url`), so a listener on a separate `url` proves that it hears what is sent there (a `listenUrl` naming
   * another database or server never hears a probe). Default `url`.
   */
  readonly probeUrl?: string;
  /** The schema whose notifications count (the payload of every QueueBox notification); others are ignored. */
  readonly schema: string;
  /** First pause before reconnecting after the connection broke or a connect failed; doubles per failure. Default 500 ms. */
  readonly reconnectDelayMs?: number;
  /** Longest pause between reconnect attempts. Default 5000 ms. */
  readonly maxReconnectDelayMs?: number;
  /**
   * Interval of a `SELECT 1` on the listening connection. A connection that died without a word (a dropped network
   * path: no FIN, no RST) would otherwise look alive while no notification can arrive. 0 turns it off. Default
   * 30000 ms.
   */
  readonly checkIntervalMs?: number;
  /**
   * Interval at which the listener tries again to take a wake-up lock another session holds (another runtime's
   * listener, or one that died and whose lock the server has not let go yet). Default 1000 ms.
   */
  readonly lockRetryMs?: number;
  /**
   * Longest wait to take a wake-up lock (the listening session's `lock_timeout`): the open transactions that inserted
   * while nobody held it, or another runtime's listener. The session passes on no notification meanwhile. Default
   * 1000 ms.
   */
  readonly lockWaitMs?: number;
  /** Longest wait for a connect or a check before the attempt counts as failed. Default 10000 ms. */
  readonly timeoutMs?: number;
  /**
   * Longest wait for the probe notification after LISTEN (see `createPostgresCapture`). Default 5000 ms, at most
   * `timeoutMs`.
   */
  readonly probeTimeoutMs?: number;
  /** Told about every failure (for logs); the capture carries on by itself. Default: ignored. */
  readonly onError?: (error: unknown, context: { readonly during: PostgresCaptureStep }) => void;
  /**
   * Told each time LISTEN is in place: `reconnects` is 0 the first time; `backendPid` is the server process of the
   * listening connection (what `pg_stat_activity.pid` shows). Default: ignored.
   */
  readonly onListening?: (info: { readonly reconnects: number; readonly backendPid: number }) => void;
  /**
   * Creates the dedicated connection. Default a `pg.Client` on `url` with TCP keep-alive and
   * `application_name` `queuebox capture`. It must be a client of its own, never one of a pool: LISTEN is
   * session state, and a pooled connection would carry it to whoever gets the connection next.
   */
  readonly createClient?: (url: string) => pg.Client;
}

const noop = () => {};

/** The channels whose wake-up locks the listener holds (migration 0011: the triggers notify only while one is held). */
const CHANNELS = [OUTBOX_CHANNEL, INBOX_CHANNEL] as const;

/**
 * Exempts the listening session from a DBA's `idle_session_timeout` (PostgreSQL 14+; nothing on older servers): the
 * connection idles on purpose between notifications, and a timeout below `checkIntervalMs` ended it again and again
 * (an outside DBA audit: 15 reconnects in 50 s at 3 s, each a gap in the wake-ups). It is this session's setting only.
 */
const NO_IDLE_TIMEOUT = `SELECT pg_catalog.set_config(name, '0', false) FROM pg_catalog.pg_settings WHERE name = 'idle_session_timeout'`;

/** Takes the wake-up lock of `$1` without waiting: true when this session holds it now. */
/**
 * Takes the wake-up lock of `$1`, waiting at most the session's `lock_timeout` (`lockWaitMs`, set once the probe showed
 * a session of our own): true once this session holds it; 55P03 when the wait ran out. Not a try: since migration 0012
 * every insert that finds the lock free holds it shared until its transaction ends, so under steady load (transactions
 * that overlap) a try found no gap (an outside review: 1 success in 80 tries at 125 transactions a second, and a
 * listener that heard nothing for as long as the load lasted). A waiting exclusive request makes every new shared try
 * fail, so new inserts notify at once, and the wait ends when the transactions already open do.
 */
const TAKE_LOCK =
  'SELECT true AS taken FROM (SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtextextended($1, 0::bigint))) AS l';

/** The listening session's bound on that wait. */
const LOCK_WAIT = `SELECT pg_catalog.set_config('lock_timeout', $1, false)`;

/**
 * Transactions waiting for the lock PostgreSQL takes before the commit of one that sent a notification (async.c,
 * PreCommit_Notify: `LockSharedObject(DatabaseRelationId, InvalidOid, 0, AccessExclusiveLock)`, shown in pg_locks as
 * an `object` lock on pg_database with database and objid 0).
 */
const WAITING_COMMITS = `SELECT count(*)::int AS waiting FROM pg_catalog.pg_locks
 WHERE locktype = 'object' AND database = 0 AND classid = 'pg_catalog.pg_database'::pg_catalog.regclass
   AND objid = 0 AND NOT granted`;

/** Gives the wake-up lock of `$1` back (one level of this session's exclusive hold). */
const GIVE_LOCK = 'SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1, 0::bigint)) AS given';

function defaultClient(url: string, timeoutMs: number): pg.Client {
  return new pg.Client({
    connectionString: url,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    connectionTimeoutMillis: timeoutMs,
    application_name: 'queuebox capture',
  });
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Wakes the local drains from PostgreSQL notifications: one dedicated long-lived connection (not from the
 * store's pool) runs `LISTEN queuebox_outbox; LISTEN queuebox_inbox` and calls `onOutbox` / `onInbox` for each
 * notification whose payload is `schema` (migration 0002's insert triggers and `notifyOutbox` send the schema
 * name). When the connection breaks (server restart, `pg_terminate_backend`, network), or a periodic `SELECT 1`
 * fails, it reconnects with a pause that starts at `reconnectDelayMs` (500) and doubles up to
 * `maxReconnectDelayMs` (5 s); each time LISTEN is in place again it calls both callbacks once, since rows
 * inserted during the gap sent notifications nobody heard. Nothing here decides correctness: the drains poll.
 *
 * The insert triggers notify only while some session holds the channel's wake-up lock (migration 0011, `wakeUpLockName`):
 * a notifying transaction commits only after every other one, server-wide, so nobody should pay for notifications
 * nobody hears. Once LISTEN is in place the listener takes both locks on its connection (session locks: they end with
 * it). A lock another session holds (a second runtime on the same schema) is tried again every `lockRetryMs`; the
 * triggers notify all listeners as long as one holds it. `want(target, false)` gives a lock back and keeps it given
 * back across reconnects (the local runtime's listener stepping aside under load, `createStepAside`); `want(target,
 * true)` takes it again, or keeps trying as above.
 *
 * LISTEN counts as in place only once a probe arrived: a second, short-lived connection sends a notification with a
 * payload of its own (`queuebox-probe:<uuid>`, which no schema's callbacks take), and the listening connection must
 * receive it within `probeTimeoutMs`. Through a pooler in transaction mode (PgBouncer) LISTEN succeeds but the
 * server session it ran on is handed to other clients, and notifications that reach it between their
 * transactions are dropped: the listener looked in place (and `queuebox_wakeup_listening` said 1) while no wake-up
 * ever came. Such a connect now fails with that reason and is tried again like any other. With `probeUrl` (the
 * application's pooled URL) the probe goes through that path, and the listener on `url` (a direct one) must hear it.
 */
export function createPostgresCapture(options: PostgresCaptureOptions): Capture {
  const { schema } = options;
  const firstDelay = options.reconnectDelayMs ?? 500;
  const maxDelay = Math.max(firstDelay, options.maxReconnectDelayMs ?? 5_000);
  const checkIntervalMs = options.checkIntervalMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const probeTimeoutMs = Math.min(timeoutMs, options.probeTimeoutMs ?? 5000);
  const lockRetryMs = Math.max(1, options.lockRetryMs ?? 1000);
  const lockWaitMs = Math.max(1, Math.floor(options.lockWaitMs ?? 1000));
  const createClient = options.createClient ?? ((url: string) => defaultClient(url, timeoutMs));
  const report = (error: unknown, during: PostgresCaptureStep) => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the capture.
    }
  };

  let closed = false;
  let client: pg.Client | undefined;
  let attempt: pg.Client | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let checkTimer: NodeJS.Timeout | undefined;
  let lockTimer: NodeJS.Timeout | undefined;
  /** The wake-up locks the current connection holds. */
  let held = new Set<string>();
  /** The wake-up locks this capture should hold (`want`): all of them unless told otherwise. */
  const wanted = new Set<string>(CHANNELS);
  /**
   * The takes on their way, per connection: a second take of a lock the session is taking would hold it twice
   * (session advisory locks count), and one give-back would then leave it held.
   */
  const taking = new WeakMap<pg.Client, Set<string>>();
  let delay = firstDelay;
  let listenedBefore = false;
  let reconnects = 0;
  let started: Promise<boolean> | undefined;

  // Ends a client without waiting for the server: a hung query makes pg destroy the socket at once.
  const discard = (c: pg.Client) => {
    c.removeAllListeners('notification');
    c.end().catch(noop);
  };

  function lost(c: pg.Client, error: unknown): void {
    if (c !== client) return;
    client = undefined;
    clearInterval(checkTimer);
    checkTimer = undefined;
    clearTimeout(lockTimer);
    lockTimer = undefined;
    held = new Set();
    report(error, 'connection');
    discard(c);
    scheduleReconnect();
  }

  function scheduleReconnect(): void {
    if (closed || reconnectTimer) return;
    const wait = delay;
    delay = Math.min(maxDelay, delay * 2);
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      void connect().then((ok) => {
        if (!ok) scheduleReconnect();
      });
    }, wait);
    reconnectTimer.unref();
  }

  function startChecks(c: pg.Client): void {
    if (checkIntervalMs <= 0) return;
    let checking = false;
    checkTimer = setInterval(() => {
      if (checking || c !== client) return;
      checking = true;
      withTimeout(c.query('SELECT 1'), timeoutMs, 'the check of the listening connection')
        .catch((error: unknown) => {
          report(error, 'check');
          lost(c, error);
        })
        .finally(() => {
          checking = false;
        });
    }, checkIntervalMs);
    checkTimer.unref();
  }

  /**
   * Takes the wake-up locks `c` does not hold yet; while one is held elsewhere, tries again in `lockRetryMs`. A failed
   * statement is reported; the periodic check finds a connection that is gone. A lock taken on a later try (the
   * runtime that held it stopped) wakes both drains: inserts may have notified nobody in between.
   */
  async function takeLocks(c: pg.Client, retry = false): Promise<void> {
    let taken = false;
    const inFlight = taking.get(c) ?? new Set<string>();
    taking.set(c, inFlight);
    for (const channel of CHANNELS) {
      if (held.has(channel) || inFlight.has(channel) || !wanted.has(channel) || c !== client) continue;
      inFlight.add(channel);
      try {
        const { rows } = await withTimeout(
          c.query<{ taken: boolean }>(TAKE_LOCK, [wakeUpLockName(schema, channel)]),
          timeoutMs,
          'taking the wake-up lock',
        );
        if (rows[0]?.taken === true && c === client) {
          held.add(channel);
          taken = true;
          // Let go of meanwhile (`want(…, false)` while the take was on its way): given back at once.
          if (!wanted.has(channel)) await giveLock(c, channel);
        }
      } catch (error) {
        // The wait ran out (lock_not_available): open transactions or another listener; tried again later.
        if (c === client && (error as { code?: unknown }).code !== '55P03') report(error, 'lock');
      } finally {
        inFlight.delete(channel);
      }
    }
    if (retry && taken && c === client) wakeBoth(options);
    if (c === client && missingLock() && !closed) {
      clearTimeout(lockTimer);
      lockTimer = setTimeout(() => {
        lockTimer = undefined;
        void takeLocks(c, true);
      }, lockRetryMs);
      lockTimer.unref();
    }
  }

  /** Whether a lock this capture wants is not held yet. */
  const missingLock = () => CHANNELS.some((channel) => wanted.has(channel) && !held.has(channel));

  /**
   * Gives `channel`'s lock back on `c`. A give-back that fails leaves the server's view unknown, so the connection is
   * treated as lost: a new one holds nothing, and takes what is still wanted.
   */
  async function giveLock(c: pg.Client, channel: string): Promise<void> {
    if (!held.has(channel) || c !== client) return;
    held.delete(channel);
    try {
      await withTimeout(
        c.query(GIVE_LOCK, [wakeUpLockName(schema, channel)]),
        timeoutMs,
        'giving the wake-up lock back',
      );
    } catch (error) {
      lost(c, error);
    }
  }

  /** Sends `payload` on the outbox channel from a connection of its own, then closes it. */
  async function sendProbe(payload: string): Promise<void> {
    const sender = createClient(options.probeUrl ?? options.url);
    sender.on('error', noop);
    try {
      await withTimeout(sender.connect(), timeoutMs, 'connecting the probe');
      await withTimeout(
        sender.query('SELECT pg_catalog.pg_notify($1, $2)', [OUTBOX_CHANNEL, payload]),
        timeoutMs,
        'the probe',
      );
    } finally {
      sender.end().catch(noop);
    }
  }

  async function connect(): Promise<boolean> {
    if (closed) return false;
    const c = createClient(options.url);
    attempt = c;
    // Before connect(): a client without an 'error' listener would crash the process when the server drops it.
    c.on('error', (error: Error) => lost(c, error));
    c.on('end', () => lost(c, new Error('the listening connection ended')));
    const probe = `queuebox-probe:${randomUUID()}`;
    let probeArrived: () => void = noop;
    const arrived = new Promise<void>((resolve) => {
      probeArrived = resolve;
    });
    c.on('notification', (message) => {
      if (message.payload === probe) probeArrived();
      else dispatchNotification(options, schema, message.channel, message.payload);
    });
    let backendPid = 0;
    try {
      await withTimeout(c.connect(), timeoutMs, 'connecting the listener');
      // Identifiers, not values: LISTEN takes no parameters; both names are constants of this package.
      await withTimeout(c.query(`LISTEN ${OUTBOX_CHANNEL}; LISTEN ${INBOX_CHANNEL}`), timeoutMs, 'LISTEN');
      const { rows } = await withTimeout(
        c.query<{ pid: number }>('SELECT pg_catalog.pg_backend_pid() AS pid'),
        timeoutMs,
        'reading the backend pid',
      );
      backendPid = Number(rows[0]?.pid ?? 0);
      await sendProbe(probe);
      await withTimeout(
        arrived,
        probeTimeoutMs,
        options.probeUrl === undefined || options.probeUrl === options.url
          ? 'a notification sent from another connection to reach the listener (a pooler in transaction mode, such as PgBouncer, drops them: set database.listenUrl to a direct or session-mode URL of the same database for the wake-ups; until then the drains poll)'
          : 'a notification sent through database.url to reach the listener on database.listenUrl (is it the same database, reached directly or through a session-mode pooler? until it hears one the drains poll)',
      );
      // Only once the probe showed a session of our own (through a pooler in transaction mode the setting would stay
      // on a server connection that other clients get next).
      await withTimeout(
        c.query(NO_IDLE_TIMEOUT),
        timeoutMs,
        'exempting the listener from idle_session_timeout',
      );
      await withTimeout(
        c.query(LOCK_WAIT, [`${lockWaitMs}ms`]),
        timeoutMs,
        'bounding the wait for a wake-up lock',
      );
    } catch (error) {
      // A close() during the attempt ends the client on purpose: not worth a report.
      if (!closed) report(error, 'connect');
      if (attempt === c) attempt = undefined;
      discard(c);
      return false;
    }
    if (attempt === c) attempt = undefined;
    if (closed) {
      discard(c);
      return false;
    }
    client = c;
    delay = firstDelay;
    if (listenedBefore) reconnects += 1;
    listenedBefore = true;
    startChecks(c);
    // Before the callbacks below: from here on the triggers notify (the drains woken next see what came before).
    await takeLocks(c);
    if (c !== client) return false;
    try {
      options.onListening?.({ reconnects, backendPid });
    } catch {
      // As in report().
    }
    // Rows inserted before LISTEN took effect (at start, or while the connection was down) sent notifications
    // that nobody heard: wake both drains once so they look now instead of at their next poll.
    wakeBoth(options);
    return true;
  }

  return {
    kind: 'postgres',
    start() {
      started ??= connect().then((ok) => {
        if (!ok) scheduleReconnect();
        return ok;
      });
      return started;
    },
    get listening() {
      return client !== undefined;
    },
    async waitingCommits() {
      const c = client;
      if (c === undefined) return 0;
      const { rows } = await withTimeout(
        c.query<{ waiting: number }>(WAITING_COMMITS),
        timeoutMs,
        'counting the commits that wait for the notification lock',
      );
      return rows[0]?.waiting ?? 0;
    },
    async outboxInserts() {
      const c = client;
      if (c === undefined) return undefined;
      const { rows } = await withTimeout(
        c.query<{ inserted: string | null }>(
          `SELECT n_tup_ins::text AS inserted FROM pg_catalog.pg_stat_user_tables WHERE schemaname = $1 AND relname = 'outbox'`,
          [schema],
        ),
        timeoutMs,
        "reading the outbox's insert count",
      );
      const inserted = rows[0]?.inserted;
      return inserted === undefined || inserted === null ? undefined : Number(inserted);
    },
    async want(target: WakeTarget, on: boolean) {
      const channel = target === 'outbox' ? OUTBOX_CHANNEL : INBOX_CHANNEL;
      const c = client;
      if (!on) {
        wanted.delete(channel);
        if (c !== undefined) await giveLock(c, channel);
        return false;
      }
      wanted.add(channel);
      if (c === undefined || closed) return false;
      if (!held.has(channel)) await takeLocks(c);
      return c === client && held.has(channel);
    },
    async close() {
      closed = true;
      clearTimeout(reconnectTimer);
      reconnectTimer = undefined;
      clearInterval(checkTimer);
      checkTimer = undefined;
      clearTimeout(lockTimer);
      lockTimer = undefined;
      const open = [client, attempt].filter((c): c is pg.Client => c !== undefined);
      client = undefined;
      attempt = undefined;
      await Promise.all(
        open.map(async (c) => {
          c.removeAllListeners('notification');
          await withTimeout(c.end(), timeoutMs, 'closing the listener').catch(noop);
        }),
      );
    },
  };
}
