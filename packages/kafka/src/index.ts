export * from './client.ts';
export * from './compression.ts';
export * from './consumer.ts';
export * from './lambda-event.ts';
export * from './publisher.ts';
export * from './records.ts';
export * from './security.ts';
