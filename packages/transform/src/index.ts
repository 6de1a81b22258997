export * from './jsonata.ts';
export * from './rejection.ts';
export * from './run.ts';
