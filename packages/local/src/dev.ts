import { type LoadConfigOptions, loadConfig, type QueueBoxConfig } from '@queuebox/config';
import { ConfigError, errorFields } from '@queuebox/core';
import { createLogger, type Logger } from './logger.ts';
import { type Runtime, type RuntimeOptions, startRuntime } from './runtime.ts';

/** Options of {@link runDev}. */
export interface RunDevOptions extends RuntimeOptions {
  /** Where the configuration comes from. Default: `QUEUEBOX_CONFIG`, else `./queuebox.yaml`, plus `QUEUEBOX_*`. */
  readonly load?: LoadConfigOptions;
  /**
   * Signals that stop the runtime gracefully; a second one exits at once with 130. Default SIGTERM, SIGINT and
   * SIGHUP (a closed terminal or SSH session, `kill -HUP`: stopped as gracefully as by SIGTERM, with a log line that
   * the configuration is not reloaded, rather than killed by the default disposition with deliveries in flight).
   */
  readonly signals?: readonly NodeJS.Signals[];
  /**
   * Default `process.exit`, and then an error nothing caught ends the process as {@link exitOnUncaughtError} says;
   * given, those process-wide handlers are not installed (tests and embedding own the process).
   */
  readonly exit?: (code: number) => void;
}

/**
 * The last resort of the process that owns `process.exit` (`npm start`, `queuebox dev`): an exception nothing
 * caught, or a promise rejected with no handler, is logged as one line of the log's JSON shape, with the error, and
 * the process exits 1 at once, as Node's own default does (its stack went to stderr as plain text, out of every log
 * search). Nothing is stopped gracefully, because the process's state is unknown: rows it had claimed go out again
 * once their lease expires, and stored webhooks are in the database already. Returns a function that removes the
 * handlers.
 */
export function exitOnUncaughtError(
  logger: Logger,
  exit: (code: number) => void = (code) => process.exit(code),
): () => void {
  const fatal = (what: string) => (error: unknown) => {
    try {
      logger.error(`${what}: QueueBox exits (restart it; claimed rows go out again after their lease)`, {
        error: errorFields(error),
      });
    } finally {
      exit(1);
    }
  };
  const onException = fatal('uncaught exception');
  const onRejection = fatal('unhandled promise rejection');
  process.on('uncaughtException', onException);
  process.on('unhandledRejection', onRejection);
  return () => {
    process.off('uncaughtException', onException);
    process.off('unhandledRejection', onRejection);
  };
}

/** Logs a configuration or start-up failure the way an operator can act on it. */
export function logStartFailure(logger: Logger, error: unknown): void {
  if (error instanceof ConfigError) {
    logger.error('invalid configuration; QueueBox does not start', { issues: error.issues });
  } else {
    logger.error('QueueBox could not start', { error: errorFields(error) });
  }
}

/** The signals {@link runDev} stops on by default. */
export const DEFAULT_STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

const ignoreStreamError = () => {};

/** Repeats of a signal within this many milliseconds of the first are the same request to stop. */
const SIGNAL_ECHO_MS = 1000;

/**
 * The `npm start` / `queuebox dev` process: loads and validates the configuration, starts the runtime, and on
 * SIGTERM, SIGINT or SIGHUP (which does not reload the configuration: restart to apply it) stops it gracefully
 * and exits 0 (1 when the shutdown timeout cut in-flight work short); one during start-up abandons a start that
 * waits for its database and exits 0. A second signal, a second or more after the first, exits at once with 130.
 * Start-up failures are logged and exit 1. Resolves with the running runtime (for tests and embedding), or
 * undefined after a failed or abandoned start.
 */
export async function runDev(options: RunDevOptions = {}): Promise<Runtime | undefined> {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let logger = options.logger ?? createLogger();
  let config: QueueBoxConfig;
  try {
    config = await loadConfig(options.load);
  } catch (error) {
    logStartFailure(logger, error);
    exit(1);
    return undefined;
  }
  const activeLogger = options.logger ?? createLogger({ level: config.logLevel });
  logger = activeLogger;
  if (options.exit === undefined) exitOnUncaughtError(activeLogger, exit);
  // Handlers go in before the runtime starts: a signal during start-up must still stop it gracefully, not kill
  // the process by the default disposition with work half set up.
  let runtime: Runtime | undefined;
  let stopSignal: NodeJS.Signals | undefined;
  // A signal during start-up abandons a start that waits for its database (a runtime started before it).
  const abandonStart = new AbortController();
  const stop = (started: Runtime, signal: NodeJS.Signals) =>
    started.stop(signal).then(
      (clean) => exit(clean ? 0 : 1),
      (error: unknown) => {
        activeLogger.error('shutdown failed', { error: errorFields(error) });
        exit(1);
      },
    );
  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    // Ctrl-C under `npm start` reaches the process twice at once (from the terminal and relayed by npm): only a
    // signal a moment after the first one means "stop now".
    if (stopSignal !== undefined && Date.now() - firstSignalAt < SIGNAL_ECHO_MS) return;
    if (stopSignal !== undefined) {
      activeLogger.warn('second signal: exiting without waiting', { signal });
      exit(130);
      return;
    }
    stopSignal = signal;
    firstSignalAt = Date.now();
    if (signal === 'SIGHUP') {
      // The terminal may be gone: a write to it failing (EIO, EPIPE) must not end the stop by an uncaught error.
      for (const stream of [process.stdout, process.stderr]) stream.on('error', ignoreStreamError);
      // Daemons often reload on SIGHUP; QueueBox reads its configuration once, so it stops instead (a closed
      // terminal sends it too) and says so, lest a `kill -HUP` meant as a reload go unexplained.
      activeLogger.warn(
        'SIGHUP: QueueBox does not reload its configuration on SIGHUP; stopping gracefully (restart it to apply a change)',
        { signal },
      );
    }
    if (runtime) void stop(runtime, signal);
    else {
      activeLogger.info('signal during start-up: stopping', { signal });
      abandonStart.abort(new Error(`start-up abandoned on ${signal}`));
    }
  };
  const signals = options.signals ?? DEFAULT_STOP_SIGNALS;
  for (const signal of signals) process.on(signal, onSignal);
  try {
    const signal = options.signal
      ? AbortSignal.any([options.signal, abandonStart.signal])
      : abandonStart.signal;
    runtime = await startRuntime(config, { ...options, logger: activeLogger, signal });
  } catch (error) {
    for (const signal of signals) process.off(signal, onSignal);
    if (abandonStart.signal.aborted && error === abandonStart.signal.reason) {
      activeLogger.info('stopped', { reason: stopSignal, clean: true, started: false });
      exit(0);
      return undefined;
    }
    logStartFailure(activeLogger, error);
    exit(1);
    return undefined;
  }
  if (stopSignal !== undefined) void stop(runtime, stopSignal);
  return runtime;
}
