// load-average: a `HighLoad` node condition from the 5-minute load average per
// CPU (/proc/loadavg and the host's CPU count), and optionally from CPU
// pressure (PSI, /proc/pressure/cpu `some avg60`).
//
// The condition's message names the thresholds, never the measured numbers:
// the host patches the Node whenever a field changes, so a message with the
// live load in it would cost an API write every pass. The numbers go to the
// debug log.

import { ConditionStatus, defineSetter } from '../../../sdk/js/nodestatus.js';
import { config, log, readFile, recordEvent, system, tryReadFile } from '../../../sdk/js/host.js';

export const CONDITION = 'HighLoad';
const DEFAULTS = { maxLoadPerCpu: 2.0, maxCpuPressure: null };

/** `/proc/loadavg`: `0.52 0.58 0.59 1/467 12345` → `{ load1, load5, load15 }`. */
export function parseLoadavg(text) {
  const f = text.trim().split(/\s+/);
  const [load1, load5, load15] = f.slice(0, 3).map(Number);
  if (f.length < 3 || ![load1, load5, load15].every((x) => Number.isFinite(x) && x >= 0)) {
    throw new Error(`/proc/loadavg: cannot parse ${JSON.stringify(text.slice(0, 80))}`);
  }
  return { load1, load5, load15 };
}

/**
 * `/proc/pressure/cpu` (PSI): the `some` line's averages, in percent:
 * `{ avg10, avg60, avg300 }`. Undefined when the text has no `some` line.
 */
export function parseCpuPressure(text) {
  const line = text.split('\n').find((l) => l.startsWith('some '));
  if (!line) return undefined;
  const out = {};
  for (const kv of line.slice(5).trim().split(/\s+/)) {
    const [k, v] = kv.split('=');
    if (k === 'avg10' || k === 'avg60' || k === 'avg300') out[k] = Number(v);
  }
  return Number.isFinite(out.avg60) ? out : undefined;
}

/** Checks the operator's config (`plugins.load-average.config`) over the defaults. */
export function parseConfig(raw) {
  const known = Object.keys(DEFAULTS);
  for (const k of Object.keys(raw)) {
    if (!known.includes(k)) {
      throw new Error(`config: unknown field ${JSON.stringify(k)} (known: ${known.join(', ')})`);
    }
  }
  const cfg = { ...DEFAULTS, ...raw };
  const number = (k, max = Infinity) => {
    const v = cfg[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > max) {
      throw new Error(`config: ${k} must be a number from 0 to ${max}, got ${JSON.stringify(v)}`);
    }
  };
  number('maxLoadPerCpu');
  if (cfg.maxCpuPressure !== null) number('maxCpuPressure', 100);
  return cfg;
}

/**
 * The condition for these readings: `{ status, reason, message }`.
 * `pressure` is parseCpuPressure's result, or undefined (no PSI, or not asked).
 */
export function evaluate({ load5, cpus, pressure }, cfg) {
  const perCpu = load5 / Math.max(1, cpus);
  const loadHigh = perCpu > cfg.maxLoadPerCpu;
  const checkPressure = cfg.maxCpuPressure !== null && pressure !== undefined;
  const pressureHigh = checkPressure && pressure.avg60 > cfg.maxCpuPressure;
  const loadText = `5-minute load average is ${loadHigh ? 'above' : 'at most'} ${cfg.maxLoadPerCpu} per CPU`;
  const pressureText = `CPU pressure (some, avg60) is ${pressureHigh ? 'above' : 'at most'} ${cfg.maxCpuPressure}%`;
  if (loadHigh || pressureHigh) {
    const parts = [loadHigh && loadText, pressureHigh && pressureText].filter(Boolean);
    return {
      status: ConditionStatus.True,
      reason: loadHigh ? 'LoadHigh' : 'CPUPressureHigh',
      message: parts.join('; '),
    };
  }
  return {
    status: ConditionStatus.False,
    reason: 'LoadNormal',
    message: checkPressure ? `${loadText}; ${pressureText}` : loadText,
  };
}

export const setter = defineSetter({
  metadata: {
    name: 'load-average',
    version: '0.1.0',
    description: 'sets HighLoad from the 5-minute load average per CPU (and CPU pressure)',
    paths: ['/proc'],
  },

  set(node) {
    const cfg = parseConfig(config());
    const { load1, load5, load15 } = parseLoadavg(readFile('/proc/loadavg'));
    const cpus = system().cpus;
    let pressure;
    if (cfg.maxCpuPressure !== null) {
      const psi = tryReadFile('/proc/pressure/cpu');
      pressure = psi === undefined ? undefined : parseCpuPressure(psi);
      if (pressure === undefined) log.debug('no CPU pressure (PSI) on this kernel: maxCpuPressure is ignored');
    }
    log.debug(
      `load ${load1} ${load5} ${load15}, ${cpus} CPUs, ${(load5 / Math.max(1, cpus)).toFixed(2)} per CPU` +
        (pressure ? `, CPU pressure avg60 ${pressure.avg60}%` : ''),
    );

    const { status, reason, message } = evaluate({ load5, cpus, pressure }, cfg);
    const t = node.setCondition(CONDITION, status, reason, message);
    if (t.flipped) {
      // As the kubelet does for its pressure conditions: an event when the
      // condition appears or its status changes, not on every pass.
      const high = status === ConditionStatus.True;
      recordEvent(high ? 'warning' : 'normal', high ? 'NodeHasHighLoad' : 'NodeHasNormalLoad', message);
    }
  },
});
