// node --test plugins/js/load-average
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { applySetter, fakeHost } from '../../../sdk/js/testing.js';
import { Node } from '../../../sdk/js/nodestatus.js';

const fixture = (name) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

fakeHost(); // before the setter's module loads: it imports the host's WIT interface
const { setter, parseLoadavg, parseCpuPressure, parseConfig, evaluate } = await import('./setter.js');

const DEFAULTS = parseConfig({});

// One pass: the node as the host has it after merging the setter's part.
function run(node, host) {
  const rec = fakeHost(host);
  let out;
  try {
    out = applySetter(setter, node);
  } catch (e) {
    return { error: e, rec };
  }
  return { node: out, rec, cond: out.condition('HighLoad') };
}

test('parses /proc/loadavg', () => {
  assert.deepEqual(parseLoadavg(fixture('loadavg-idle')), { load1: 0.52, load5: 0.58, load15: 0.59 });
  assert.deepEqual(parseLoadavg(fixture('loadavg-busy')), { load1: 9.87, load5: 8.4, load15: 6.02 });
  assert.throws(() => parseLoadavg(''), /cannot parse/);
  assert.throws(() => parseLoadavg('a b c 1/2 3'), /cannot parse/);
});

test('parses CPU pressure', () => {
  assert.deepEqual(parseCpuPressure(fixture('pressure-cpu-calm')), { avg10: 0, avg60: 1.25, avg300: 0.8 });
  assert.equal(parseCpuPressure(fixture('pressure-cpu-busy')).avg60, 64.03);
  assert.equal(parseCpuPressure('full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n'), undefined);
  assert.equal(parseCpuPressure(''), undefined);
});

test('checks its config', () => {
  assert.deepEqual(DEFAULTS, { maxLoadPerCpu: 2, maxCpuPressure: null });
  assert.equal(parseConfig({ maxLoadPerCpu: 0 }).maxLoadPerCpu, 0);
  assert.throws(() => parseConfig({ maxLoadPerCPU: 1 }), /unknown field "maxLoadPerCPU"/);
  assert.throws(() => parseConfig({ maxLoadPerCpu: '2' }), /maxLoadPerCpu must be a number/);
  assert.throws(() => parseConfig({ maxLoadPerCpu: -1 }), /maxLoadPerCpu must be a number/);
  assert.throws(() => parseConfig({ maxCpuPressure: 120 }), /from 0 to 100/);
});

test('evaluates load per CPU against the threshold', () => {
  assert.deepEqual(evaluate({ load5: 0.58, cpus: 4 }, DEFAULTS), {
    status: 'False',
    reason: 'LoadNormal',
    message: '5-minute load average is at most 2 per CPU',
  });
  assert.deepEqual(evaluate({ load5: 8.4, cpus: 4 }, DEFAULTS), {
    status: 'True',
    reason: 'LoadHigh',
    message: '5-minute load average is above 2 per CPU',
  });
  // Exactly at the threshold is not high; zero CPUs counts as one.
  assert.equal(evaluate({ load5: 8, cpus: 4 }, DEFAULTS).status, 'False');
  assert.equal(evaluate({ load5: 3, cpus: 0 }, DEFAULTS).status, 'True');
  // maxLoadPerCpu 0: any load at all is high.
  assert.equal(evaluate({ load5: 0.01, cpus: 64 }, { ...DEFAULTS, maxLoadPerCpu: 0 }).status, 'True');
});

test('evaluates CPU pressure when asked and present', () => {
  const cfg = { ...DEFAULTS, maxCpuPressure: 50 };
  const busy = parseCpuPressure(fixture('pressure-cpu-busy'));
  const calm = parseCpuPressure(fixture('pressure-cpu-calm'));
  assert.deepEqual(evaluate({ load5: 0.5, cpus: 4, pressure: busy }, cfg), {
    status: 'True',
    reason: 'CPUPressureHigh',
    message: 'CPU pressure (some, avg60) is above 50%',
  });
  assert.deepEqual(evaluate({ load5: 9, cpus: 1, pressure: busy }, cfg), {
    status: 'True',
    reason: 'LoadHigh',
    message: '5-minute load average is above 2 per CPU; CPU pressure (some, avg60) is above 50%',
  });
  assert.equal(
    evaluate({ load5: 0.5, cpus: 4, pressure: calm }, cfg).message,
    '5-minute load average is at most 2 per CPU; CPU pressure (some, avg60) is at most 50%',
  );
  // No PSI on this kernel: only the load counts.
  assert.equal(evaluate({ load5: 0.5, cpus: 4 }, cfg).message, '5-minute load average is at most 2 per CPU');
});

test('metadata asks for /proc', () => {
  const m = setter.metadata();
  assert.equal(m.name, 'load-average');
  assert.deepEqual(m.paths, ['/proc']);
  assert.equal(m.affectsReadiness, false);
});

test('sets HighLoad with the kubelet rules, and an event only on a flip', () => {
  const idle = { files: { '/proc/loadavg': fixture('loadavg-idle') }, system: { cpus: 4 } };
  const first = run(Node.named('n1'), idle);
  assert.equal(first.error, undefined);
  assert.equal(first.cond.status, 'False');
  assert.equal(first.cond.reason, 'LoadNormal');
  assert.equal(first.cond.message, '5-minute load average is at most 2 per CPU');
  assert.deepEqual(first.rec.events, [
    { type: 'normal', reason: 'NodeHasNormalLoad', message: '5-minute load average is at most 2 per CPU' },
  ]);
  assert.ok(first.rec.logs.some((l) => l.level === 'debug' && /0\.58/.test(l.message)));

  // Same state: no event, and only the heartbeat may change.
  const old = { ...first.cond, lastHeartbeatTime: '2020-01-01T00:00:00Z', lastTransitionTime: '2020-01-01T00:00:00Z' };
  first.node.object.status.conditions = [old];
  const again = run(first.node, { ...idle, files: { '/proc/loadavg': '1.10 1.30 1.00 2/400 999\n' } });
  assert.deepEqual(again.rec.events, []);
  assert.equal(again.cond.message, first.cond.message);
  assert.equal(again.cond.lastTransitionTime, '2020-01-01T00:00:00Z');
  assert.notEqual(again.cond.lastHeartbeatTime, '2020-01-01T00:00:00Z');

  // Busy: flips to True with a Warning event.
  const busy = run(again.node, { files: { '/proc/loadavg': fixture('loadavg-busy') }, system: { cpus: 2 } });
  assert.equal(busy.cond.status, 'True');
  assert.equal(busy.cond.reason, 'LoadHigh');
  assert.notEqual(busy.cond.lastTransitionTime, '2020-01-01T00:00:00Z');
  assert.deepEqual(busy.rec.events, [
    { type: 'warning', reason: 'NodeHasHighLoad', message: '5-minute load average is above 2 per CPU' },
  ]);
  // Other fields are untouched: its part is its condition alone.
  assert.deepEqual(busy.node.object.metadata, { name: 'n1' });
  assert.deepEqual(busy.rec.parts.map((p) => Object.keys(p.status)), [['conditions']]);
  assert.deepEqual(busy.rec.parts[0].status.conditions.map((c) => c.type), ['HighLoad']);
  assert.equal(busy.rec.parts[0].metadata, undefined);
});

test('maxLoadPerCpu 0 makes any load high', () => {
  const r = run(Node.named('n1'), {
    files: { '/proc/loadavg': fixture('loadavg-idle') },
    config: { maxLoadPerCpu: 0 },
  });
  assert.equal(r.cond.status, 'True');
  assert.equal(r.cond.message, '5-minute load average is above 0 per CPU');
});

test('reads CPU pressure when configured', () => {
  const files = { '/proc/loadavg': fixture('loadavg-idle'), '/proc/pressure/cpu': fixture('pressure-cpu-busy') };
  const r = run(Node.named('n1'), { files, config: { maxCpuPressure: 50 } });
  assert.equal(r.cond.reason, 'CPUPressureHigh');
  // Not configured: the PSI file is not read.
  assert.equal(run(Node.named('n1'), { files }).cond.status, 'False');
  // Configured but absent (no PSI in this kernel): load only.
  const noPsi = run(Node.named('n1'), { files: { '/proc/loadavg': fixture('loadavg-idle') }, config: { maxCpuPressure: 50 } });
  assert.equal(noPsi.cond.status, 'False');
  assert.ok(noPsi.rec.logs.some((l) => /maxCpuPressure is ignored/.test(l.message)));
});

test('fails clearly without /proc/loadavg', () => {
  const notGranted = run(Node.named('n1'), { files: { '/proc/loadavg': fixture('loadavg-idle') }, paths: [] });
  assert.equal(typeof notGranted.error, 'string');
  assert.match(notGranted.error, /^\/proc\/loadavg: not inside a directory granted to this plugin \(granted: none\)/);
  const missing = run(Node.named('n1'), { files: { '/proc/uptime': '1 1\n' } });
  assert.equal(missing.error, '/proc/loadavg: no such file or directory');
  const badConfig = run(Node.named('n1'), { files: { '/proc/loadavg': fixture('loadavg-idle') }, config: { max: 1 } });
  assert.match(badConfig.error, /unknown field "max"/);
});
