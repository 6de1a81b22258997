/**
 * What the auth*.test.ts files share. Signatures there are built the way each provider documents them, with
 * node:crypto directly, never through the verifier's own helpers.
 */
import { createHmac } from 'node:crypto';
import type { AuthOptions, AuthResult } from '../src/index.ts';

export const NOW = 1_750_000_000_000;
export const NOW_SEC = NOW / 1000;
export const body = (text = '{"id":"evt_1","type":"invoice.paid"}') => new TextEncoder().encode(text);
export const hmacHex = (key: string | Buffer, data: string) =>
  createHmac('sha256', key).update(data).digest('hex');
export const hmacB64 = (key: string | Buffer, data: string) =>
  createHmac('sha256', key).update(data).digest('base64');
export const options = (
  scheme: AuthOptions['scheme'],
  secrets: string[],
  extra: Partial<AuthOptions> = {},
): AuthOptions => ({
  scheme,
  secrets,
  ...extra,
});
export const failure = (result: AuthResult) => (result.ok ? 'ok' : result.reason);
