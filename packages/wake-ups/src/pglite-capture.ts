import type { Capture } from './capture.ts';
import {
  dispatchNotification,
  INBOX_CHANNEL,
  OUTBOX_CHANNEL,
  type WakeCallbacks,
  wakeBoth,
} from './channels.ts';

/**
 * What the capture needs of a PGlite instance: its `listen()` and `query()` (the `PGlite` class of
 * `@electric-sql/pglite` fits). Typed structurally so this package does not load PGlite.
 */
export interface PgliteListener {
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
  query(sql: string): Promise<unknown>;
}

/**
 * Makes the insert triggers of this session notify on every insert (migration 0011). On a server they notify only
 * while a listener holds the channel's wake-up lock, but PGlite is one session: the listener's lock would be the
 * inserter's own, which never stands in its way, so the trigger could not tell that someone listens.
 */
const NOTIFY_ALWAYS = `SELECT pg_catalog.set_config('queuebox.wake_ups', 'always', false)`;

/** Options of {@link createPgliteCapture}. */
export interface PgliteCaptureOptions extends WakeCallbacks {
  /** The embedded database the store runs on (the same instance: PGlite is one session). */
  readonly db: PgliteListener;
  /** The schema whose notifications count; others are ignored. */
  readonly schema: string;
  /** Told when LISTEN failed (for logs). Default: ignored. */
  readonly onError?: (error: unknown) => void;
}

/**
 * Wakes the local drains from the embedded PGlite's notifications, through its `listen()` API. PGlite is one
 * in-process session, so there is no connection to lose and nothing to reconnect; the notifications come from
 * migration 0002's insert triggers (e.g. a replayed row, or a forward), which it sets to notify on every insert
 * (`queuebox.wake_ups`, migration 0011), and `notifyOutbox`. After LISTEN is in
 * place both callbacks are called once, as the PostgreSQL capture does.
 */
export function createPgliteCapture(options: PgliteCaptureOptions): Capture {
  const { db, schema } = options;
  let unlisten: (() => Promise<void>)[] = [];
  let closed = false;
  let started: Promise<boolean> | undefined;

  async function listen(): Promise<boolean> {
    try {
      await db.query(NOTIFY_ALWAYS);
      for (const channel of [OUTBOX_CHANNEL, INBOX_CHANNEL]) {
        const stop = await db.listen(channel, (payload) => {
          dispatchNotification(options, schema, channel, payload);
        });
        // close() ran meanwhile: it could not see this listener, so stop it here.
        if (closed) await stop().catch(() => undefined);
        else unlisten.push(stop);
      }
    } catch (error) {
      try {
        options.onError?.(error);
      } catch {
        // A logging hook must not break the start.
      }
      return false;
    }
    if (closed) return false;
    wakeBoth(options);
    return true;
  }

  return {
    kind: 'pglite',
    start() {
      started ??= listen();
      return started;
    },
    get listening() {
      return !closed && unlisten.length === 2;
    },
    async close() {
      closed = true;
      const stops = unlisten;
      unlisten = [];
      // The database may be closed already (the store owns it): nothing is left to stop then.
      await Promise.allSettled(stops.map((stop) => stop()));
    },
  };
}
