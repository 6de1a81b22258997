export * from './connection.ts';
export * from './ingest-port.ts';
export * from './publisher.ts';
export * from './source.ts';
export * from './template.ts';
