export * from './auth/index.ts';
export * from './extract.ts';
export * from './headers.ts';
export * from './ingest.ts';
export * from './options.ts';
export * from './pull.ts';
export * from './relay.ts';
export * from './transform.ts';
