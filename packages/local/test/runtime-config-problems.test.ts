/**
 * The local runtime refuses a configuration the schema accepts but the assembly cannot compile, with every problem
 * at once and before it opens the store: a bad source JSONata (compiled only in `ready()`), a bad route JSONata
 * and an unknown transform function used to come out in two rounds, the second only after the first was fixed.
 */
import { parseConfig } from '@queuebox/config';
import { ConfigError, silentLogger } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { startRuntime } from '../src/runtime.ts';

describe('startRuntime with transforms that do not compile', () => {
  it('reports the source, route and destination transform problems together, and opens no store', async () => {
    const config = parseConfig({
      database: { provider: 'postgres', url: 'postgres://nobody@127.0.0.1:9/none', schema: 'never_opened' },
      http: { port: 0, host: '127.0.0.1' },
      sources: {
        hooks: {
          type: 'http',
          path: 'hooks',
          auth: { scheme: 'none' },
          topic: 'hooks',
          transform: { jsonata: '$.(' },
        },
      },
      destinations: {
        sink: { type: 'http', url: 'http://127.0.0.1:9/sink', transform: { function: 'no-such-function' } },
      },
      routes: [{ match: '#', destination: 'sink', transform: { jsonata: '{ "a": ' } }],
    });
    let opened = false;

    const started = startRuntime(config, {
      logger: silentLogger,
      openStore: async () => {
        opened = true;
        throw new Error('the store must not be opened');
      },
    });

    const error = await started.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    const paths = (error as ConfigError).issues.map((issue) => issue.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        expect.stringContaining('sources.hooks'),
        expect.stringContaining('routes[0]'),
        expect.stringContaining('destinations.sink'),
      ]),
    );
    expect(opened).toBe(false);
  });
});

describe('startRuntime configuration warnings', () => {
  it('logs each warning with its text, as `config check` prints it', async () => {
    // Prepare: a GitHub source whose key is left to its unsigned delivery header.
    const config = parseConfig({
      database: { provider: 'postgres', url: 'postgres://nobody@127.0.0.1:9/none', schema: 'never_opened' },
      http: { port: 0, host: '127.0.0.1' },
      sources: {
        gh: {
          type: 'http',
          path: 'gh',
          auth: { scheme: 'github', secrets: ['a-long-enough-secret-0123456789'] },
        },
      },
    });
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line) });
    // Act
    await startRuntime(config, {
      logger,
      openStore: async () => {
        throw new Error('no store in this test');
      },
    }).catch(() => undefined);
    // Assess
    const warnings = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.level === 'WARN');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toMatch(/^configuration warning: sources\.gh\.idempotencyKey .{20,}/);
    expect(warnings[0]?.path).toBe('sources.gh.idempotencyKey');
  });
});
