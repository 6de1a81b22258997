// Local (PostgreSQL / PGlite): a capture listens for inserts and wakes the drains of the same process.
export * from './capture.ts';
export * from './channels.ts';
export * from './configured-capture.ts';
// AWS: a function wakes another with a debounced asynchronous invoke, and books a one-shot tick of itself.
export * from './debounced-wake-up.ts';
export * from './deferred-tick.ts';
export * from './lambda-invoker.ts';
export * from './pglite-capture.ts';
export * from './postgres-capture.ts';
export * from './step-aside.ts';
// The application's waker of outbox-tick is `@queuebox/wake-ups/outbox-waker` (not here: @queuebox/client).
