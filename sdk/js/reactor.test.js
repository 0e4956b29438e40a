// node --test sdk/js
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fakeHost } from './testing.js';
import { ConditionStatus, defineReactor, linesOf } from './nodestatus.js';

const host = fakeHost();
const { recordEvent } = await import('./host.js');

const { setter, reactor } = defineReactor({
  metadata: { name: 'xid-watch', version: '0.1.0' },
  set(node) {
    node.setCondition('GPUHealthy', ConditionStatus.True, 'NoXid');
  },
  subscribe: () => ({
    streams: [
      { name: 'kernel', patterns: ['NVRM: Xid'] },
      { name: 'syslog', source: 'file', path: '/var/log/syslog', patterns: ['x'], span: 3, lookbackSeconds: 60, extract: '^\\S+ (.*)$' },
      { name: 'units', source: 'journal', units: ['containerd'], patterns: ['y'] },
    ],
    watch: ['/etc/features.d'],
  }),
  onLines(node, lines) {
    if (lines.dropped) throw new Error(`${lines.dropped} lines were dropped`);
    for (const m of lines.matches) {
      node.setCondition('GPUHealthy', ConditionStatus.False, 'Xid', `${m.stream}: ${m.text}`);
      recordEvent('warning', 'GPUXid', m.text);
    }
  },
});

const NODE = JSON.stringify({ metadata: { name: 'n1' }, status: {} });

test('subscribe gives the WIT shape: variants, u64 as BigInt, option as undefined', () => {
  const s = reactor.subscribe();
  assert.deepEqual(s.streams[0], {
    name: 'kernel', source: { tag: 'kmsg' }, patterns: ['NVRM: Xid'], span: 1, extract: undefined, lookbackSeconds: 0n,
  });
  assert.deepEqual(s.streams[1].source, { tag: 'file', val: '/var/log/syslog' });
  assert.deepEqual([s.streams[1].span, s.streams[1].lookbackSeconds, s.streams[1].extract], [3, 60n, '^\\S+ (.*)$']);
  assert.deepEqual(s.streams[2].source, { tag: 'journal', val: ['containerd'] });
  assert.deepEqual(s.watch, ['/etc/features.d']);
  const bad = defineReactor({ metadata: { name: 'b' }, set() {}, subscribe: () => ({ streams: [{ name: 'k', source: 'dmesg' }] }), onLines() {} });
  assert.throws(() => bad.reactor.subscribe(), /source "dmesg" is not kmsg, file or journal/);
});

test('onLines gives the part and records the events; the batch as the host hands it (BigInt) too', () => {
  host.events.length = 0;
  const part = JSON.parse(reactor.onLines(NODE, linesOf('kernel', 0, 'NVRM: Xid (PCI:0000:17:00): 79', 'NVRM: Xid (PCI:0000:17:00): 48')));
  assert.equal(part.status.conditions.length, 1);
  assert.equal(part.status.conditions[0].message, 'kernel: NVRM: Xid (PCI:0000:17:00): 48');
  assert.deepEqual(host.events.map((e) => [e.type, e.reason]), [['warning', 'GPUXid'], ['warning', 'GPUXid']]);
  const wit = { matches: [{ stream: 'kernel', pattern: 0, text: 'NVRM: Xid', timeMs: 1764400000000n }], dropped: 0n };
  assert.equal(JSON.parse(reactor.onLines(NODE, wit)).status.conditions[0].status, 'False');
  assert.throws(() => reactor.onLines(NODE, { matches: [], dropped: 2n }), (e) => e === '2 lines were dropped');
  // The setter export is defineSetter's.
  assert.equal(JSON.parse(setter.set(NODE)).status.conditions[0].reason, 'NoXid');
  assert.equal(setter.metadata().name, 'xid-watch');
});

test('defineReactor needs subscribe and onLines', () => {
  assert.throws(() => defineReactor({ metadata: { name: 'x' }, set() {}, onLines() {} }), /subscribe/);
  assert.throws(() => defineReactor({ metadata: { name: 'x' }, set() {}, subscribe() {} }), /onLines/);
});
