// Its tests, natively: node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fakeHost } from '../../../../sdk/js/testing.js';
import { linesOf } from '../../../../sdk/js/nodestatus.js';

const host = fakeHost(); // before the setter's module loads: it imports the host's WIT interface
const { setter, reactor } = await import('./setter.js');

const NODE = JSON.stringify({ metadata: { name: 'n1' }, status: {} });
const LINE = 'nvme nvme0: I/O 123 QID 4 timeout, reset controller';

test('a controller reset makes the condition True with an event', () => {
  const [off] = JSON.parse(setter.set(NODE)).status.conditions;
  assert.deepEqual([off.status, off.reason], ['False', 'NoReset']);
  const [on] = JSON.parse(reactor.onLines(NODE, linesOf('kernel', 0, LINE))).status.conditions;
  assert.deepEqual([on.status, on.message], ['True', LINE]);
  assert.deepEqual(host.events, [{ type: 'warning', reason: 'NVMeControllerReset', message: LINE }]);
});

test('it follows the kernel log with the config\'s pattern', () => {
  assert.deepEqual(reactor.subscribe().streams[0].patterns, ['nvme (nvme\\d+): .*reset']);
  fakeHost({ config: { pattern: 'reset' } });
  assert.deepEqual(reactor.subscribe().streams[0].patterns, ['reset']);
});
