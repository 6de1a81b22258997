/**
 * What every benchmark prints next to its figures: the machine's load, and small statistics. The machine is
 * shared, so a figure without the load average it was measured under cannot be compared with another.
 */
import { spawnSync } from 'node:child_process';
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

/** The machine's CPU counters from /proc/stat (all CPUs, clock ticks). */
export interface CpuTicks {
  readonly busy: number;
  readonly total: number;
}

/** Busy and total CPU ticks of the whole machine now; zeros without /proc/stat. */
export function readCpuTicks(): CpuTicks {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    // cpu user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user.
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
    return { busy, total: busy + (idle ?? 0) + (iowait ?? 0) };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/**
 * How busy the machine was between two readings, as a share of all its cores, and how much of that the
 * benchmark's own processes (`ownCpuSeconds` of CPU over `seconds`) account for: e.g. `busy 96% (ours 61%)`. The
 * rest is other users' work (and PostgreSQL's, which serves both). A more direct measure of contention than the
 * load average, which lags by about a minute.
 */
export function busyLine(before: CpuTicks, after: CpuTicks, ownCpuSeconds: number, seconds: number): string {
  const total = after.total - before.total;
  if (total <= 0) return 'busy n/a';
  const busy = (after.busy - before.busy) / total;
  const ours = ownCpuSeconds / (seconds * cpus().length);
  return `CPU busy ${(busy * 100).toFixed(0)}% (ours ${(ours * 100).toFixed(0)}%)`;
}

const CLOCK_TICKS = (() => {
  const answer = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout);
  return Number.isFinite(answer) && answer > 0 ? answer : 100;
})();

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat; 0 when it cannot be read. */
export function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at ") "; utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
