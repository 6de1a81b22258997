/**
 * The two databases this package's store tests run on: the test PostgreSQL (a fresh schema, `poolSize`
 * connections) and an in-memory PGlite (schema `queuebox`).
 */
import { PGlite } from '@electric-sql/pglite';
import { testPool } from '@queuebox/testing';
import { createPgExecutor, createPgliteExecutor, type SqlExecutor } from '../src/index.ts';

export interface StoreTarget {
  readonly name: string;
  readonly executor: () => SqlExecutor;
  readonly schema: string;
}

export function storeTargets(schema: string, poolSize: number): StoreTarget[] {
  return [
    { name: 'PostgreSQL', executor: () => createPgExecutor(testPool(poolSize)), schema },
    { name: 'PGlite', executor: () => createPgliteExecutor(new PGlite()), schema: 'queuebox' },
  ];
}
