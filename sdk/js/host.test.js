// node --test sdk/js: host.js over the fake host of testing.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Node, defineSetter } from './nodestatus.js';
import { normalizePath } from './src/path.js';
import { applySetter, fakeHost, mergePart } from './testing.js';

fakeHost();
const host = await import('./host.js');

test('log, config, events and system go to the host', () => {
  const rec = fakeHost({ config: { a: 1 }, system: { cpus: 8 } });
  host.log.info('hello');
  host.log('warn', 'careful');
  assert.throws(() => host.log('loud', 'x'), /log level/);
  host.recordEvent(host.EventType.Warning, 'Something', 'happened');
  // The Python SDK's spelling works too.
  host.recordEvent('Normal', 'Calm', 'again');
  assert.throws(() => host.recordEvent('bad', 'R', 'm'), /event type/);
  assert.deepEqual(rec.logs, [
    { level: 'info', message: 'hello' },
    { level: 'warn', message: 'careful' },
  ]);
  assert.deepEqual(rec.events, [
    { type: host.EventType.Warning, reason: 'Something', message: 'happened' },
    { type: host.EventType.Normal, reason: 'Calm', message: 'again' },
  ]);
  assert.deepEqual(host.config({ a: 0, b: 2 }), { a: 1, b: 2 });
  assert.equal(host.system().cpus, 8);
  assert.equal(host.system().hostname, 'test-node');
});

test('paths resolve . and .. lexically (host.js and the fake host alike)', () => {
  assert.equal(normalizePath('/proc/./pressure//cpu'), '/proc/pressure/cpu');
  assert.equal(normalizePath('/proc/../etc/hostname'), '/etc/hostname');
  assert.equal(normalizePath('/..'), '/');
  assert.equal(normalizePath('/a/b/'), '/a/b');
});

test('files are read inside granted directories only', () => {
  fakeHost({
    files: {
      '/proc/loadavg': '0.10 0.20 0.30 1/100 4242\n',
      '/proc/pressure/cpu': 'some avg10=0.00 avg60=1.50 avg300=0.00 total=1\n',
      '/etc/hostname': 'x\n',
    },
    paths: ['/proc'],
  });
  assert.equal(host.readFile('/proc/loadavg'), '0.10 0.20 0.30 1/100 4242\n');
  assert.equal(host.readFile('/proc/./pressure//cpu').startsWith('some'), true);
  assert.equal(host.tryReadFile('/proc/nope'), undefined);
  assert.throws(() => host.readFile('/proc/nope'), (e) => e.code === 'no-entry' && /\/proc\/nope: no such file/.test(e.message));
  assert.throws(() => host.readFile('/etc/hostname'), (e) => e.code === 'not-granted' && /granted: \/proc/.test(e.message));
  assert.throws(() => host.tryReadFile('/etc/hostname'), /not inside a directory granted/);
  assert.throws(() => host.readFile('/proc/../etc/hostname'), /not inside a directory granted/);
  assert.throws(() => host.readFile('relative'), /not an absolute path/);
  assert.equal(host.exists('/proc/loadavg'), true);
  assert.equal(host.exists('/proc/pressure'), true);
  assert.equal(host.exists('/proc/none'), false);
  assert.throws(() => host.exists('/etc/hostname'), /not inside a directory granted/);
  assert.deepEqual(host.readDir('/proc'), ['loadavg', 'pressure']);
  assert.deepEqual(host.readDir('/proc/pressure'), ['cpu']);
  assert.throws(() => host.readFile('/proc/loadavg', { maxBytes: 4 }), /larger than 4 bytes/);
  assert.deepEqual([...host.readBytes('/proc/pressure/cpu').slice(0, 4)], [115, 111, 109, 101]);
});

test('nothing granted: the error says so', () => {
  fakeHost({ files: { '/proc/loadavg': '1 1 1 1/1 1\n' }, paths: [] });
  assert.throws(() => host.readFile('/proc/loadavg'), /granted: none/);
});

test('statvfs errors name the path', () => {
  fakeHost({ statvfs: { '/': { totalBytes: 10n, freeBytes: 5n, availableBytes: 4n, totalInodes: 3n, freeInodes: 2n, readOnly: false } } });
  assert.equal(host.statvfs('/').freeBytes, 5n);
  assert.throws(() => host.statvfs('/var'), /statvfs \/var: \/var is not inside a granted path/);
});

const NODE = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'n1', labels: { a: '1' } },
  status: {
    images: [{ names: ['x'], sizeBytes: 1 }],
    conditions: [
      { type: 'Ready', status: 'True', lastHeartbeatTime: '2020-01-01T00:00:00Z', lastTransitionTime: '2020-01-01T00:00:00Z' },
    ],
  },
};

test('mergePart does what the host does with a part', () => {
  const part = {
    metadata: { name: 'ignored', labels: { a: null, b: '2' } },
    status: {
      conditions: [{ type: 'Ready', $patch: 'delete' }, { type: 'X', status: 'True', reason: 'R' }],
      capacity: { 'example.com/z': '1' },
      images: null,
    },
  };
  const t = '2030-01-01T00:00:00Z';
  const out = mergePart(new Node(structuredClone(NODE)), JSON.stringify(part), t);
  assert.equal(out.name, 'n1');
  assert.deepEqual(out.labels(), { b: '2' });
  assert.deepEqual(out.conditions(), [
    { type: 'X', status: 'True', reason: 'R', lastHeartbeatTime: t, lastTransitionTime: t },
  ]);
  assert.deepEqual(out.toJSON().status.capacity, { 'example.com/z': '1' });
  assert.equal(out.toJSON().status.images, undefined);
  assert.equal(NODE.status.images.length, 1); // the input is unchanged
  // A condition whose status holds keeps its transition time; none changes nothing.
  const kept = mergePart(NODE, { status: { conditions: [{ type: 'Ready', status: 'True' }] } }, t);
  assert.equal(kept.condition('Ready').lastTransitionTime, '2020-01-01T00:00:00Z');
  assert.equal(kept.condition('Ready').lastHeartbeatTime, t);
  assert.deepEqual(mergePart(NODE, undefined).toJSON(), NODE);
});

test('applySetter gives the merged node, and the fake host keeps the parts', () => {
  const rec = fakeHost();
  const setter = defineSetter({ metadata: { name: 'x' }, set: (n) => n.setLabel('example.com/x', 'y') });
  const out = applySetter(setter, NODE);
  assert.deepEqual(out.labels(), { a: '1', 'example.com/x': 'y' });
  assert.deepEqual(out.toJSON().status, NODE.status);
  assert.deepEqual(rec.parts, [{ metadata: { labels: { 'example.com/x': 'y' } } }]);
});
