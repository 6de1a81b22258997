// One file per port. Drivers implement them in the adapter packages; nothing here has a runtime dependency.
export * from './admin-store.ts';
export * from './claims.ts';
export * from './clock.ts';
export * from './inbox-store.ts';
export * from './logger.ts';
export * from './message-id.ts';
export * from './outbox-store.ts';
export * from './publisher.ts';
export * from './store.ts';
