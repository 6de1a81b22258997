/**
 * The `queuebox` command line, up to the point where a command would load the configuration: options are read
 * by node:util's parseArgs, and every usage problem answers exit code 2 with the CLI's own words and the usage
 * text, before any file or database is touched.
 */
import { describe, expect, it } from 'vitest';
import { planAdminCommand } from '../src/admin-cli.ts';
import { EXIT, runCli, USAGE } from '../src/commands.ts';

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
    env: {},
    cwd: '/nonexistent-queuebox-test-dir',
  });
  return { code, out, err };
}

describe('queuebox command line', () => {
  it('prints the usage on --help and -h (exit 0), and on no command (exit 2)', async () => {
    const help = await run('--help');
    const short = await run('stats', '-h');
    const none = await run();

    expect(help).toEqual({ code: EXIT.ok, out: `${USAGE}\n`, err: '' });
    expect(short.code).toBe(EXIT.ok);
    expect(none).toEqual({ code: EXIT.usage, out: '', err: `${USAGE}\n` });
  });

  it('answers a usage error with --json also as a JSON object on stdout, so a script reading stdout gets an answer', async () => {
    const unknown = await run('frobnicate', '--json');
    const conflicting = await run('outbox', 'requeue', '1', '--all', '--json');
    const none = await run('--json');
    const plain = await run('frobnicate');

    for (const answer of [unknown, conflicting, none]) {
      expect(answer.code).toBe(EXIT.usage);
      expect(JSON.parse(answer.out)).toMatchObject({
        ok: false,
        error: 'usage',
        message: expect.any(String),
      });
      expect(answer.err).toContain(USAGE);
    }
    expect(JSON.parse(unknown.out).message).toBe('unknown command "frobnicate"');
    expect(plain.out).toBe('');
  });

  it('shows only --older-than values that purge accepts, and says the least', () => {
    const line = USAGE.split('\n').find((l) => l.trimStart().startsWith('purge')) ?? '';
    const examples = /--older-than ([^\s]+)/.exec(line)?.[1]?.split('|') ?? [];

    expect(examples.length).toBeGreaterThan(0);
    for (const age of examples) {
      const plan = planAdminCommand({
        words: ['purge'],
        options: { state: 'sent', 'older-than': age },
        flags: new Set(),
      });
      expect(plan, `--older-than ${age}`).toMatchObject({ kind: 'purge' });
    }
    expect(line).toContain('(at least 1h)');
  });

  it.each([
    [['stats', '--bogus'], 'unknown option --bogus'],
    [['stats', '-x'], 'unknown option -x'],
    [['outbox', 'list', '--state'], '--state needs a value'],
    [['outbox', 'list', '--state', '--json'], '--state needs a value'],
    [['outbox', 'list', '--state', 'dead', '--state=sent'], '--state may be given once'],
    [['stats', '--config'], '--config needs a file name'],
    [['stats', '--config', '-x'], '--config needs a file name'],
    [['outbox', 'requeue', '--all=yes'], '--all takes no value'],
    [['outbox', 'requeue', '--json=1'], '--json takes no value'],
    [['config', 'check', '--dry-run'], '--dry-run does not apply to "config check"'],
    [['stats', '--state', 'dead'], '--state does not apply to "stats"'],
    [['frobnicate'], 'unknown command "frobnicate"'],
  ])('refuses %j with exit 2: %s', async (argv, problem) => {
    const { code, out, err } = await run(...argv);

    expect(code).toBe(EXIT.usage);
    // With --json the problem is also a JSON object on stdout (an argument --json did not parse as the flag, e.g.
    // `--json=1`, gives none).
    expect(out).toBe(
      argv.includes('--json') ? `${JSON.stringify({ ok: false, error: 'usage', message: problem })}\n` : '',
    );
    expect(err).toBe(`${problem}\n\n${USAGE}\n`);
  });

  it('reads --name=value and --name value alike, and takes a value that starts with one dash', async () => {
    // A bad limit reaches the command's own check, so both spellings were parsed as the value of --limit.
    const spaced = await run('outbox', 'list', '--limit', '-5');
    const inline = await run('outbox', 'list', '--limit=-5');

    expect(spaced.code).toBe(EXIT.usage);
    expect(spaced.err).toMatch(/^--limit /);
    expect(inline).toEqual(spaced);
  });
});
