export { bearerMatches, type HeaderValue, headerOf } from './auth.ts';
export {
  BULK_BATCH_TRIES,
  BULK_RETRY_PAUSE_MS,
  BulkConflictError,
  type BulkRetryOptions,
  requeueConflictMessage,
  retryTransientConflicts,
} from './bulk-retry.ts';
export {
  type AdminHandler,
  type AdminHandlerOptions,
  type AdminRequest,
  type AdminResponse,
  createAdminHandler,
  formatAge,
  HTTP_PURGE_DEDUP_REMEDY,
  INBOX_DEDUP_WINDOW_MS,
  MAX_REPORTED_IDS,
  purgeDedupWarning,
} from './handler.ts';
export {
  type AdminHttpAnswer,
  type AdminRoutes,
  type AdminRoutesDeps,
  createAdminRoutes,
} from './http-routes.ts';
export {
  DEFAULT_LIST_LIMIT,
  DEFAULT_PURGE_BATCH_SIZE,
  FAILED_WORD,
  isRowId,
  MAX_REQUEUE_IDS,
  PURGE_MAX_AGE_MS,
  PURGE_MIN_AGE_MS,
  parseAgeMs,
  parseBatchSize,
  parseLimit,
  parseName,
  parsePurgeState,
  parseState,
  parseTable,
  stateWord,
  stateWords,
} from './input.ts';
export {
  busyMessage,
  busyView,
  type KeyBusy,
  type KeyInFlight,
  keyBusyMessage,
  keyInFlightMessage,
  type RequeueBusy,
  type RequeueSkipped,
  replayKeyBusyMessage,
  requeueBusy,
  requeueSkipped,
  skippedMessage,
  skippedView,
} from './key-in-flight.ts';
export { type PurgeCounter, purgeCounterOf } from './purge-count.ts';
export { forwardedRowsNote, redactNotFinalMessage } from './redact.ts';
export {
  type RetentionBatch,
  type RetentionConfig,
  type RetentionOptions,
  type RetentionPolicy,
  type RetentionReport,
  retentionPolicyOf,
  runRetention,
} from './retention.ts';
export { countsView, inboxRowView, outboxRowView, statsView } from './views.ts';
