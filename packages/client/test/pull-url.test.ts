/** Which store a pull worker's URL opens. No database: the SQL Server pool is never reachable here. */
import { type AddressInfo, createServer } from 'node:net';
import { StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { openPullWorker, providerOfUrl } from '../src/pull.ts';

describe('providerOfUrl', () => {
  it.each([
    ['postgres://app@db:5432/app', 'postgres'],
    ['postgresql://app@db/app', 'postgres'],
    ['PostgreSQL://app@db/app', 'postgres'],
    ['sqlserver://sa:pw@db:1433/app', 'sqlserver'],
    ['mssql://sa:pw@db/app', 'sqlserver'],
    ['Server=db,1433;Database=app;User Id=sa;Password=pw', 'sqlserver'],
  ])('%s → %s', (url, provider) => {
    expect(providerOfUrl(url)).toBe(provider);
  });

  it.each([
    ['mysql://db/app', /has the scheme mysql:\/\//],
    ['db:5432', /has no scheme/],
    ['', /has no scheme/],
  ])('refuses %j', (url, message) => {
    expect(() => providerOfUrl(url)).toThrow(message);
  });
});

describe('openPullWorker on postgres://', () => {
  it('gives up on a server that accepts the connection and never answers after connectTimeoutMs', async () => {
    // Prepare: a server that takes connections, reads what comes and answers nothing.
    const silent = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const worker = await openPullWorker({
      url: `postgres://app@127.0.0.1:${port}/app`,
      source: 'pulled',
      connectTimeoutMs: 200,
    });
    try {
      // Act / Assess
      await expect(worker.claim(1, 60_000)).rejects.toThrow(StoreUnavailableError);
    } finally {
      await worker.close();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('openPullWorker on sqlserver://', () => {
  it('opens without connecting; a claim reports the unreachable server as StoreUnavailableError', async () => {
    // Prepare: nothing listens on port 1 of this machine.
    const worker = await openPullWorker({
      url: 'sqlserver://sa:unused@127.0.0.1:1/app?encrypt=false',
      source: 'pulled',
    });
    try {
      // Act / Assess
      await expect(worker.claim(1, 60_000)).rejects.toThrow(StoreUnavailableError);
    } finally {
      await worker.close();
    }
  });
});
