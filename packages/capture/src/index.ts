export * from './capture.ts';
export * from './channels.ts';
export * from './pglite-capture.ts';
export * from './postgres-capture.ts';
