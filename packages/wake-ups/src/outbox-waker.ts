/**
 * The application's side of the AWS wake-ups: after the transaction that enqueued rows has committed, an
 * asynchronous invoke of outbox-tick starts a drain at once. It lives in `@queuebox/client`
 * (packages/client/src/outbox-waker.ts), because applications install the client as a standalone tarball
 * (`npm run pack:client`): packed from there, it carries only the optional `@aws-sdk/client-lambda` peer, not the
 * LISTEN captures, the Scheduler bookings or the configuration package of the functions' wake-ups. Re-exported
 * here so that every wake-up is found under this package's name; not part of the package index, so a Lambda
 * bundle that imports `@queuebox/wake-ups` never holds the client.
 */
export {
  type AsyncInvoke,
  createOutboxWaker,
  type OutboxWaker,
  type OutboxWakerOptions,
} from '@queuebox/client';
