export * from './connection.ts';
export * from './publisher.ts';
export * from './source.ts';
