/**
 * Splits a CPU profile of the runtime (`QUEUEBOX_BENCH_CPU_PROFILE=<dir> npx tsx bench/inbox-http.ts`) into the
 * steps of a webhook: each sample goes to the innermost frame of ours (auth, JSON, ingest, store, relay, outbox,
 * HTTP server) on its stack; samples with only node:http or pg frames go to those; the rest is "other". pg's
 * socket writes and result parsing run from the event loop after an `await`, so their stacks do not say which
 * statement they serve: they are one line for all statements.
 *
 *   npx tsx bench/profile-split.ts <file.cpuprofile> [runtime µs per request]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

const STEPS: readonly (readonly [string, RegExp])[] = [
  ['auth: HMAC', /packages\/inbox\/src\/auth\//],
  ['JSON parse and storable check', /packages\/core\/src\/json-text|packages\/inbox\/src\/body\.ts/],
  ['store insert (group commit)', /store-postgres\/src\/inbox-(batch|store|dedupe)/],
  [
    'relay',
    /packages\/inbox\/src\/relay|store-postgres\/src\/inbox-(claim|sql)|packages\/local\/src\/drain-loops/,
  ],
  [
    'outbox delivery (poller, undici POST)',
    /packages\/outbox\/src|store-postgres\/src\/outbox|node_modules\/undici/,
  ],
  ['ingest: headers, fields', /packages\/inbox\/src\/(ingest|extract|headers|transform)/],
  ['HTTP answer write and server (packages/local)', /packages\/local\/src\/(server|body|metrics|logger)/],
];
const FALLBACKS: readonly (readonly [string, RegExp])[] = [
  ['HTTP parse (node:http)', /node:_http|node:internal\/http/],
  ['pg driver: statement writes, result parsing', /node_modules\/(pg|pg-protocol|pg-pool|postgres-)/],
];

const [file, perRequest] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: profile-split.ts <file.cpuprofile> [µs per request]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

function stepOf(id: number): string {
  const name = byId.get(id)?.callFrame.functionName;
  if (name === '(idle)' || name === '(garbage collector)') return name;
  let fallback = 'other (event loop, streams, promises)';
  let fellBack = false;
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const url = byId.get(at)?.callFrame.url ?? '';
    for (const [step, pattern] of STEPS) if (pattern.test(url)) return step;
    if (!fellBack) {
      const hit = FALLBACKS.find(([, pattern]) => pattern.test(url));
      if (hit) {
        fallback = hit[0];
        fellBack = true;
      }
    }
  }
  return fallback;
}

const counts = new Map<string, number>();
for (const sample of profile.samples) {
  const step = stepOf(sample);
  counts.set(step, (counts.get(step) ?? 0) + 1);
}
const busy = profile.samples.length - (counts.get('(idle)') ?? 0);
counts.delete('(idle)');
for (const [step, n] of [...counts].sort((a, b) => b[1] - a[1])) {
  const share = n / busy;
  const micros =
    perRequest === undefined ? '' : `${(share * Number(perRequest)).toFixed(0).padStart(5)} µs  `;
  console.log(`${(share * 100).toFixed(1).padStart(5)}%  ${micros}${step}`);
}
console.log(`${busy} busy samples`);
