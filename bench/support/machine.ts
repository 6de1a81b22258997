/**
 * What every benchmark prints next to its figures: the machine's load, and small statistics. The machine is
 * shared, so a figure without the load average it was measured under cannot be compared with another.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** The 1-, 5- and 15-minute load averages from /proc/loadavg, e.g. `4.19 5.69 5.25`. */
export function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return 'n/a';
  }
}

/** The 1-minute load average, or NaN where /proc/loadavg is missing. */
export function loadNow(): number {
  return Number.parseFloat(loadAverage());
}

/** `2 CPUs (model)` for the header line. */
export function machineLine(): string {
  const list = cpus();
  return `${list.length} CPUs (${list[0]?.model.trim() ?? 'unknown'}), load average ${loadAverage()}`;
}

/** `12,345` */
export function format(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** Megabytes with one decimal. */
export function megabytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** The `p`th percentile (nearest rank) of `values`; 0 for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? 0;
}

/** CPU clock ticks (user + system) of every process whose command name starts with `postgres`, by pid. */
export type PostgresCpu = ReadonlyMap<string, number>;

/**
 * The CPU ticks of the PostgreSQL server and all its backends now; pass two readings to `postgresCpuSeconds`.
 * Backends of other users on a shared machine are included, so the difference is an upper bound for ours.
 */
export function readPostgresCpu(): PostgresCpu {
  const ticks = new Map<string, number>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return ticks;
  }
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      if (!stat.slice(stat.indexOf('(') + 1, close).startsWith('postgres')) continue;
      // After the command come the fields from 3 (state) on; utime and stime are fields 14 and 15.
      const rest = stat.slice(close + 2).split(' ');
      ticks.set(pid, Number(rest[11]) + Number(rest[12]));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return ticks;
}

/**
 * CPU seconds PostgreSQL used between two readings, process by process, so a backend that exits in between
 * (another user's test disconnecting) does not subtract its lifetime's CPU. NaN without /proc.
 */
export function postgresCpuSeconds(before: PostgresCpu, after: PostgresCpu): number {
  if (after.size === 0) return Number.NaN;
  let ticks = 0;
  for (const [pid, now] of after) ticks += now - (before.get(pid) ?? 0);
  // Clock ticks: 100 per second on Linux.
  return ticks / 100;
}
