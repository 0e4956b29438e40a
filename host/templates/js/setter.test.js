// node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applySetter, fakeHost } from './{{kit}}/sdk/js/testing.js';
import { Node } from './{{kit}}/sdk/js/nodestatus.js';

fakeHost({ files: { '{{grant}}/osrelease': '6.1.0-18-amd64\n' }, paths: ['{{grant}}'] }); // before the setter's module loads
const { setter, majorMinor, LABEL } = await import('./setter.js');

test('reads major.minor', () => {
  assert.equal(majorMinor('6.1.0-18-amd64'), '6.1');
  assert.equal(majorMinor('linux'), undefined);
});

test('labels the node', () => {
  // set() returns the setter's part: only the fields it sets.
  const part = JSON.parse(setter.set(Node.named('n').toString()));
  assert.deepEqual(part, { metadata: { labels: { [LABEL]: '6.1' } } });
  // applySetter: the node as the engine has it after the merge.
  const out = applySetter(setter, Node.named('n'));
  assert.equal(out.name, 'n');
  assert.equal(out.label(LABEL), '6.1');
});
