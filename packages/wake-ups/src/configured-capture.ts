import type { QueueBoxConfig } from '@queuebox/config';
import type { Logger } from '@queuebox/core';
import { type Capture, createNoCapture } from './capture.ts';
import type { WakeCallbacks } from './channels.ts';
import { createPgliteCapture, type PgliteListener } from './pglite-capture.ts';
import { createPostgresCapture } from './postgres-capture.ts';

/**
 * `error` as an `Error` (a thrown non-Error becomes one with its text as message), for the `error` field of a log
 * line: the local runtime's logger writes an `Error` as its error fields (name, message, code; never the stack).
 */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** What {@link createWakeUpCapture} works with. */
export interface WakeUpCaptureDeps extends WakeCallbacks {
  /** False: no capture at all (the drains poll). Default true. */
  readonly enabled?: boolean;
  readonly database: QueueBoxConfig['database'];
  /** The embedded database the store runs on, when the runtime opened it itself (provider `pglite`). */
  readonly pglite?: PgliteListener | undefined;
  /** Where the listener's troubles go, as `{ component: 'wake-ups' }` lines. */
  readonly logger: Logger;
  /** Told whenever the listener connects or loses its connection. */
  readonly onListeningChange?: (listening: boolean) => void;
}

/**
 * The capture of the configured database (docs/design.md §2 packages/wake-ups): PostgreSQL → a dedicated LISTEN
 * connection on `database.listenUrl`, else `database.url` (its probe sent through `database.url`); PGlite → its `listen()` on the store's own instance (none when the store was
 * injected, so there is no instance to listen on); SQL Server and the RDS Data API (no session to LISTEN on) → none
 * (polling only). Problems are logged: one line when the listener is lost and one when it is back, not one per
 * retry.
 */
export function createWakeUpCapture(deps: WakeUpCaptureDeps): Capture {
  const { database } = deps;
  const log = deps.logger.child({ component: 'wake-ups' });
  const callbacks = { onOutbox: deps.onOutbox, onInbox: deps.onInbox };
  const changed = (listening: boolean) => {
    try {
      deps.onListeningChange?.(listening);
    } catch {
      // A metrics hook must not break the listener.
    }
  };
  if (deps.enabled === false) return createNoCapture();
  if (database.provider === 'postgres' && database.url !== undefined) {
    let failures = 0;
    let lockFailures = 0;
    return createPostgresCapture({
      ...callbacks,
      url: database.listenUrl ?? database.url,
      probeUrl: database.url,
      schema: database.schema,
      onError(error, { during }) {
        if (during === 'lock') {
          // The connection listens; the inserts may not notify until the lock is taken (tried again each second).
          lockFailures += 1;
          if (lockFailures === 1 || lockFailures % 60 === 0) {
            log.warn('wake-ups: could not take a wake-up lock; inserts may not notify until it is taken', {
              failures: lockFailures,
              error: asError(error),
            });
          }
          return;
        }
        failures += 1;
        if (during !== 'connect') changed(false);
        if (failures === 1 || failures % 20 === 0) {
          log.warn('wake-up listener unavailable; polling still delivers, reconnecting', {
            during,
            failures,
            error: asError(error),
          });
        }
      },
      onListening({ reconnects, backendPid }) {
        changed(true);
        if (reconnects === 0) log.info('wake-ups: listening for inserts (LISTEN/NOTIFY)', { backendPid });
        else log.info('wake-up listener reconnected', { reconnects, failures, backendPid });
        failures = 0;
      },
    });
  }
  if (database.provider === 'pglite' && deps.pglite !== undefined) {
    return createPgliteCapture({
      ...callbacks,
      db: deps.pglite,
      schema: database.schema,
      onError(error) {
        log.warn('wake-ups: PGlite listen failed; polling only', { error: asError(error) });
      },
    });
  }
  return createNoCapture();
}
