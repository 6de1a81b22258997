export * from './api-gateway.ts';
export * from './check.ts';
export * from './deadline.ts';
export * from './delivery-metrics.ts';
export * from './health.ts';
export * from './service-cache.ts';
export * from './services.ts';
export * from './sources.ts';
