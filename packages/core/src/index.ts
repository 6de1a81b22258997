export * from './errors.ts';
export * from './messages.ts';
export * from './ports.ts';
export * from './states.ts';
