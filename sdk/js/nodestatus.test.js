// node --test sdk/js
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  ConditionStatus,
  Node,
  Quantity,
  defineSetter,
  errorMessage,
  now,
  pluginInfo,
  rfc3339,
} from './nodestatus.js';

function sample() {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'n1', labels: { a: '1' } },
    spec: { taints: [] },
    status: {
      images: [{ names: ['x'], sizeBytes: 1 }],
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          lastHeartbeatTime: '2020-01-01T00:00:00Z',
          lastTransitionTime: '2020-01-01T00:00:00Z',
          reason: 'r',
          message: 'm',
        },
      ],
    },
  });
}

test('an untouched node round-trips unchanged', () => {
  const s = sample();
  assert.equal(Node.parse(s).toString(), s);
  assert.equal(Node.named('x').name, 'x');
});

test('rejects text that is not a Node object', () => {
  assert.throws(() => Node.parse('[1]'), /JSON object/);
  assert.throws(() => Node.parse('{"metadata": 3}'), /metadata must be an object/);
  assert.throws(() => Node.parse('{} trailing'));
});

test('edits touch only their field', () => {
  const n = Node.parse(sample());
  n.setLabel('example.com/x', 'y');
  n.setCapacity('example.com/dongle', Quantity.units(2));
  n.setAllocatable('memory', '1024Mi');
  n.setNodeInfo('kernelVersion', '6.1');
  n.setAnnotation('example.com/note', 'hello');
  const out = JSON.parse(n.toString());
  assert.deepEqual(out.metadata.labels, { a: '1', 'example.com/x': 'y' });
  assert.equal(out.status.capacity['example.com/dongle'], '2');
  assert.equal(out.status.allocatable.memory, '1Gi');
  assert.equal(out.status.nodeInfo.kernelVersion, '6.1');
  assert.deepEqual(out.status.images, [{ names: ['x'], sizeBytes: 1 }]);
  assert.deepEqual(out.spec, { taints: [] });
  assert.equal(n.label('example.com/x'), 'y');
  assert.equal(n.annotation('example.com/note'), 'hello');
  assert.equal(n.capacity('example.com/dongle').toString(), '2');
  assert.equal(n.allocatable('memory').asMillis(), 1024n * 1024n * 1024n * 1000n);
  assert.equal(n.nodeInfo('kernelVersion'), '6.1');
  assert.equal(n.removeLabel('a'), true);
  assert.equal(n.removeLabel('a'), false);
  assert.equal(n.removeAnnotation('example.com/note'), true);
  assert.equal(n.removeResource('example.com/dongle'), true);
  assert.equal(n.capacity('example.com/dongle'), undefined);
  assert.equal(n.removeResource('example.com/dongle'), false);
  assert.throws(() => n.setLabel('k', 3), /must be a string/);
});

test('setting a value that is already there changes nothing', () => {
  const s = sample();
  const n = Node.parse(s);
  n.setLabel('a', '1');
  n.setStatus('images', [{ names: ['x'], sizeBytes: 1 }]);
  assert.equal(n.toString(), s);
  n.setAddresses([
    ['InternalIP', '10.0.0.4'],
    ['Hostname', 'n1'],
  ]);
  assert.deepEqual(n.status('addresses'), [
    { type: 'InternalIP', address: '10.0.0.4' },
    { type: 'Hostname', address: 'n1' },
  ]);
  assert.equal(n.removeStatus('addresses'), true);
  assert.equal(n.removeStatus('addresses'), false);
});

test('conditions follow the kubelet rules', () => {
  const n = Node.parse(sample());
  let t = n.setCondition('Ready', ConditionStatus.True, 'r2', 'm2', '2021-01-01T00:00:00Z');
  assert.deepEqual(t, { previous: 'True', current: 'True', flipped: false });
  let c = n.condition('Ready');
  assert.equal(c.lastHeartbeatTime, '2021-01-01T00:00:00Z');
  assert.equal(c.lastTransitionTime, '2020-01-01T00:00:00Z');
  assert.equal(c.reason, 'r2');
  assert.equal(c.message, 'm2');

  t = n.setCondition('Ready', false, 'r3', 'm3', '2022-01-01T00:00:00Z');
  assert.deepEqual(t, { previous: 'True', current: 'False', flipped: true });
  c = n.condition('Ready');
  assert.equal(c.lastTransitionTime, '2022-01-01T00:00:00Z');
  assert.equal(c.status, 'False');

  t = n.setCondition('Custom', ConditionStatus.Unknown, '', '', '2022-01-01T00:00:00Z');
  assert.equal(t.flipped, true);
  assert.equal(t.previous, undefined);
  assert.deepEqual(
    n.conditions().map((c) => c.type),
    ['Ready', 'Custom'],
  );
  // The condition returned is a copy.
  n.condition('Custom').status = 'True';
  assert.equal(n.condition('Custom').status, 'Unknown');
  assert.equal(n.removeCondition('Custom'), true);
  assert.equal(n.removeCondition('Custom'), false);
  assert.equal(n.condition('Custom'), undefined);
  assert.throws(() => n.setCondition('X', 'yes'), /not True, False or Unknown/);
});

test('a condition on a node without status or conditions is created', () => {
  const n = new Node({ metadata: { name: 'a' } });
  const t = n.setCondition('HighLoad', 'False', 'LoadNormal', 'fine');
  assert.equal(t.flipped, true);
  const c = n.condition('HighLoad');
  assert.match(c.lastHeartbeatTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(c.lastTransitionTime, c.lastHeartbeatTime);
});

test('timestamps are RFC 3339 in UTC seconds', () => {
  assert.equal(rfc3339(new Date(0)), '1970-01-01T00:00:00Z');
  assert.equal(rfc3339(Date.UTC(2026, 0, 1)), '2026-01-01T00:00:00Z');
  assert.equal(rfc3339(new Date('2000-02-29T00:00:00.999Z')), '2000-02-29T00:00:00Z');
  assert.match(now(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test('quantities parse the API syntax', () => {
  const m = (s) => Quantity.parse(s).asMillis();
  assert.equal(m('2'), 2000n);
  assert.equal(m('1500m'), 1500n);
  assert.equal(m('100Mi'), 100n * 1024n * 1024n * 1000n);
  assert.equal(m('1.5G'), 1_500_000_000_000n);
  assert.equal(m('1e3'), 1_000_000n);
  assert.equal(m('1E'), 10n ** 21n);
  assert.equal(m('0.0001'), 1n);
  assert.equal(m('-1'), -1000n);
  assert.equal(m('+.5'), 500n);
  assert.equal(m(' 16Gi '), 16n * 2n ** 30n * 1000n);
  for (const bad of ['', 'x', '1X', '1.2.3', '--1', 'Mi', '.', '1e', '1e999', 3]) {
    assert.throws(() => Quantity.parse(bad), /is not a quantity/, String(bad));
  }
  assert.equal(Quantity.parse('16Gi').format, 'BinarySI');
  assert.equal(Quantity.parse('16G').format, 'DecimalSI');
});

test('quantities format canonically', () => {
  assert.equal(Quantity.bytes(16 * 1024 * 1024 * 1024).toString(), '16Gi');
  assert.equal(Quantity.bytes(32876232n * 1024n).toString(), '32876232Ki');
  assert.equal(Quantity.bytes(1000).toString(), '1k'); // under 1Ki: decimal, as Kubernetes writes it
  assert.equal(Quantity.units(110).toString(), '110');
  assert.equal(Quantity.units(2000).toString(), '2k');
  assert.equal(Quantity.millis(1500).toString(), '1500m');
  assert.equal(Quantity.bytes(0).toString(), '0');
  assert.equal(Quantity.parse('1536Mi').toString(), '1536Mi');
  assert.equal(Quantity.parse('2048Mi').toString(), '2Gi');
  assert.equal(Quantity.parse('1.5').toString(), '1500m');
  assert.equal(JSON.stringify({ q: Quantity.units(3) }), '{"q":"3"}');
  const q = Quantity.parse('100Mi');
  assert.ok(Quantity.parse(q.toString()).equals(q));
  assert.throws(() => Quantity.units(1.5), /integer/);
  assert.throws(() => Quantity.bytes(-1), /negative/);
});

test('quantity arithmetic', () => {
  const cap = Quantity.bytes(1 << 30);
  assert.equal(cap.saturatingSub(Quantity.parse('2Gi')).asMillis(), 0n);
  assert.equal(cap.saturatingSub(Quantity.parse('512Mi')).toString(), '512Mi');
  assert.equal(cap.add(Quantity.parse('1Gi')).toString(), '2Gi');
  assert.equal(Quantity.millis(1500).asUnitsCeil(), 2n);
  assert.equal(Quantity.millis(-1500).asUnitsCeil(), -1n);
  assert.equal(Quantity.millis(2000).asUnitsCeil(), 2n);
  assert.equal(Quantity.millis(1500).toNumber(), 1.5);
  assert.equal(Quantity.units(1).compare(Quantity.millis(999)), 1);
});

test('defineSetter turns set() into the WIT result', () => {
  const setter = defineSetter({
    metadata: { name: 'demo', version: '1.2.3', paths: ['/proc'] },
    set(node) {
      if (node.label('fail')) throw new Error('asked to fail');
      if (node.label('fail-string')) throw 'plain string';
      node.setLabel('example.com/demo', 'yes');
    },
  });
  assert.deepEqual(setter.metadata(), {
    name: 'demo',
    version: '1.2.3',
    description: '',
    paths: ['/proc'],
    env: [],
    affectsReadiness: false,
  });
  // The part: only the fields the setter wrote.
  assert.deepEqual(JSON.parse(setter.set(sample())), { metadata: { labels: { 'example.com/demo': 'yes' } } });

  const failing = Node.parse(sample());
  failing.setLabel('fail', 'x');
  // Errors are thrown as strings: componentize-js makes a thrown string the `err` result.
  assert.throws(() => setter.set(failing.toString()), (e) => e === 'asked to fail');
  failing.removeLabel('fail');
  failing.setLabel('fail-string', 'x');
  assert.throws(() => setter.set(failing.toString()), (e) => e === 'plain string');
  assert.throws(() => setter.set('nope'), (e) => typeof e === 'string' && /not a Node/.test(e));
});

test('defineSetter refuses async set and bad metadata', () => {
  const s = defineSetter({ metadata: { name: 'a' }, async set() {} });
  assert.throws(() => s.set('{}'), (e) => /synchronous/.test(e));
  assert.throws(() => defineSetter({ metadata: { name: 'Bad_Name' }, set() {} }), /lowercase/);
  assert.throws(() => pluginInfo({ name: 'ok', paths: ['proc'] }), /absolute/);
  assert.equal(pluginInfo({ name: 'ok' }).version, '0.0.0');
});

test('errorMessage', () => {
  assert.equal(errorMessage(new TypeError('t')), 't');
  assert.equal(errorMessage('s'), 's');
  assert.equal(errorMessage({ payload: 'p' }), 'p');
  assert.equal(errorMessage(42), '42');
});

test('a keyed section changed in place is claimed whole', () => {
  const n = new Node({ metadata: { name: 'n' }, status: { capacity: { cpu: '4', x: '1' } } });
  const cap = n.statusMut('capacity');
  delete cap.x;
  cap['example.com/y'] = '2';
  assert.equal(n.capacity('example.com/y').toString(), '2'); // reads see the writes
  assert.deepEqual(n.part(), { status: { capacity: { cpu: '4', x: null, 'example.com/y': '2' } } });

  const c = Node.parse(sample());
  c.statusMut('conditions').push({ type: 'Mine', status: 'True' });
  c.removeCondition('Ready');
  assert.deepEqual(c.part().status.conditions, [
    { type: 'Ready', $patch: 'delete' },
    { type: 'Mine', status: 'True' },
  ]);
});

test('other status fields are one field', () => {
  const n = Node.parse(sample());
  n.setStatus('images', []);
  n.removeStatus('config');
  n.statusMut('daemonEndpoints').kubeletEndpoint = { Port: 10250 };
  assert.deepEqual(n.part(), {
    status: { images: [], config: null, daemonEndpoints: { kubeletEndpoint: { Port: 10250 } } },
  });
  const a = new Node({ status: { allocatable: { cpu: '1' } } });
  a.removeStatus('allocatable');
  assert.deepEqual(a.part(), { status: { allocatable: { cpu: null } } });
});

test('reading node.object is free, changing it fails the call', () => {
  const reader = defineSetter({
    metadata: { name: 'reader' },
    set(node) {
      node.setLabel('k', node.object.metadata.labels.a);
      node.setLabel('after', 'raw');
    },
  });
  assert.deepEqual(JSON.parse(reader.set(sample())), { metadata: { labels: { k: '1', after: 'raw' } } });
  for (const [change, where] of [
    [(o) => (o.metadata.labels.x = 'y'), 'metadata.labels[x]'],
    [(o) => (o.spec.unschedulable = true), 'spec'],
    [(o) => (o.status.conditions[0].status = 'False'), 'status.conditions[Ready]'],
    [(o) => (o.status.phase = 'Running'), 'status.phase'],
  ]) {
    const s = defineSetter({ metadata: { name: 'raw' }, set: (node) => change(node.object) });
    assert.throws(() => s.set(sample()), (e) => typeof e === 'string' && e.includes(`changed ${where} in node.object`));
  }
});
