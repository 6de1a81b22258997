/**
 * A database password rotated under warm functions (an outside credential-rotation audit): Secrets Manager holds the
 * new URL, the container still the old one, and the database refuses it once the pooled sessions end. Before, the
 * refusal (SQLSTATE class 28) was an ordinary StoreError: inbox-http answered 500, the store was kept and the secret
 * was read again only after the 5-minute reload, and then from the secret cache, up to 5 minutes more. Now it is an
 * outage (503: senders retry) and the next invocation reads the configuration again, its secrets past their cache.
 *
 * The rotation is staged on the machine's PostgreSQL (trust authentication): the old URL's role is made NOLOGIN and
 * its sessions ended, as the old password stops working; the new URL names another role. The secret resolver caches
 * as Secrets Manager's Powertools provider does: a read returns the cached value unless it is asked for a fresh one.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@queuebox/config';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { createServiceCache } from '@queuebox/use-cases';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { cleanup, signStandardWebhook } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: credentials rotation', ['postgres']);

describe.skipIf(needs.skipReason)('a database password rotated under a warm inbox-http', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_rotation', 1);
  const suffix = randomBytes(4).toString('hex');
  const [oldRole, newRole] = [`fn_rot_old_${suffix}`, `fn_rot_new_${suffix}`];
  const urlOf = (role: string) => {
    const url = new URL(needs.url.postgres);
    url.username = role;
    url.password = '';
    return url.toString();
  };
  const shells: TestShell[] = [];
  let configFile: string;

  beforeAll(async () => {
    for (const role of [oldRole, newRole]) await pool.query(`CREATE ROLE ${role} LOGIN SUPERUSER`);
    configFile = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: 'secret://queuebox/database#url',
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:9/none',
      }),
    );
    const migrate = testShell(
      await writeConfigFile(
        functionConfigYaml({
          databaseUrl: needs.url.postgres,
          schema: schema.name,
          receiverUrl: 'http://127.0.0.1:9/none',
        }),
      ),
    );
    shells.push(migrate);
    await createMigrate(migrate)(undefined, aLambdaContext());
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    for (const role of [oldRole, newRole]) {
      await pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
      await pool.query(`DROP ROLE IF EXISTS ${role}`);
    }
    await cleanup();
  });

  it('answers 503 while the database refuses the old password, then reads the secret anew and stores again', async () => {
    // Prepare: Secrets Manager as the Powertools provider caches it (5 minutes: never expired in this test)
    let current = JSON.stringify({ url: urlOf(oldRole) });
    let cached: string | undefined;
    const freshReads: string[] = [];
    const secrets = {
      async getSecret(_name: string, read?: { readonly fresh?: boolean }) {
        if (read?.fresh === true || cached === undefined) {
          if (read?.fresh === true) freshReads.push(current);
          cached = current;
        }
        return cached;
      },
    };
    const env = { QUEUEBOX_CONFIG: configFile };
    const options = testShell(configFile, {
      createCache: (shellOptions) => {
        const cache = createServiceCache({
          ...shellOptions,
          loadConfig: (read) =>
            loadConfig({ env, secrets, ...(read?.freshSecrets ? { freshSecrets: true } : {}) }),
        });
        options.caches.push(cache);
        return cache;
      },
    });
    shells.push(options);
    const inboxHttp = createInboxHttp(options);
    const post = (id: string) => {
      const body = JSON.stringify({ type: 'order.paid', data: { id } });
      return inboxHttp(anApiGatewayEvent({ headers: signStandardWebhook(id, body), body }), aLambdaContext());
    };
    const before = await post('rot-1');

    // Act: the rotation. The secret holds the new URL; the old role may no longer log in, and its sessions end.
    current = JSON.stringify({ url: urlOf(newRole) });
    await pool.query(`ALTER ROLE ${oldRole} NOLOGIN`);
    await pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [oldRole]);
    const answers: number[] = [];
    for (let i = 0; i < 5 && answers.at(-1) !== 202; i++)
      answers.push((await post(`rot-2-${i}`)).statusCode ?? 0);

    // Assess: outages (never a 500) until the configuration is read anew, then stored with the new role
    expect(before.statusCode).toBe(202);
    expect(answers.at(-1)).toBe(202);
    expect(answers.slice(0, -1).every((status) => status === 503)).toBe(true);
    expect(answers.length).toBeLessThanOrEqual(3);
    expect(freshReads).toEqual([current]);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema.name}".inbox`);
    expect(rows[0]?.n).toBe(2);
  });
});
