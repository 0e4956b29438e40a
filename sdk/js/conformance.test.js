// The shared conformance vectors in sdk/conformance/ (quantities, the
// condition rules, RFC 3339 times, the part a 0.2 setter returns), which the
// Rust, Python and C SDKs run too.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Node, Quantity, defineSetter, rfc3339 } from './nodestatus.js';

function vectors(name) {
  const v = JSON.parse(readFileSync(new URL(`../conformance/${name}`, import.meta.url), 'utf8'));
  return v;
}

function cases(v, key) {
  assert.ok(Array.isArray(v[key]) && v[key].length > 0, `no ${key} case`);
  return v[key];
}

const quantities = vectors('quantity.json');

test('quantities parse as the vectors say', () => {
  for (const c of cases(quantities, 'parse')) {
    const q = Quantity.parse(c.input);
    assert.deepEqual(
      [q.asMillis(), q.format, q.toString()],
      [BigInt(c.millis), c.format, c.canonical],
      `parse ${JSON.stringify(c.input)}`,
    );
  }
});

test('quantities the vectors call invalid are refused', () => {
  for (const c of cases(quantities, 'invalid')) {
    assert.throws(() => Quantity.parse(c.input), undefined, `parse ${JSON.stringify(c.input)}`);
  }
});

test('quantities are written as the vectors say', () => {
  for (const c of cases(quantities, 'format')) {
    const q = new Quantity(BigInt(c.millis), c.format);
    assert.equal(q.toString(), c.canonical, `${c.millis}m ${c.format}`);
  }
});

test('quantity arithmetic follows the vectors', () => {
  for (const c of cases(quantities, 'arithmetic')) {
    const [a, b] = [Quantity.parse(c.a), Quantity.parse(c.b)];
    assert.deepEqual(
      [a.add(b).toString(), a.saturatingSub(b).toString()],
      [c.add, c.saturating_sub],
      `${c.a} and ${c.b}`,
    );
  }
  for (const c of cases(quantities, 'units_ceil')) {
    assert.equal(Quantity.parse(c.input).asUnitsCeil(), BigInt(c.units_ceil), c.input);
  }
});

function nodeWith(conditions) {
  const status = conditions === null ? {} : { conditions };
  return Node.parse(JSON.stringify({ metadata: { name: 'n1' }, status }));
}

function conditionsOf(node) {
  return JSON.parse(node.toString()).status.conditions ?? null;
}

const conditions = vectors('condition.json');

test('conditions are set as the vectors say', () => {
  for (const c of cases(conditions, 'set')) {
    const node = nodeWith(c.conditions);
    const s = c.set;
    const t = node.setCondition(s.type, s.status, s.reason, s.message, s.now);
    assert.deepEqual(conditionsOf(node), c.want, c.name);
    assert.deepEqual({ ...t, previous: t.previous ?? null }, c.transition, c.name);
  }
});

test('conditions are removed as the vectors say', () => {
  for (const c of cases(conditions, 'remove')) {
    const node = nodeWith(c.conditions);
    assert.equal(node.removeCondition(c.remove), c.removed, c.name);
    assert.deepEqual(conditionsOf(node), c.want, c.name);
  }
});

test('times are written as the vectors say', () => {
  for (const c of cases(vectors('time.json'), 'rfc3339')) {
    assert.equal(rfc3339(new Date(c.seconds * 1000)), c.rfc3339, String(c.seconds));
  }
});

const OPS = {
  set_label: (n, k, v) => n.setLabel(k, v),
  remove_label: (n, k) => n.removeLabel(k),
  set_annotation: (n, k, v) => n.setAnnotation(k, v),
  remove_annotation: (n, k) => n.removeAnnotation(k),
  set_condition: (n, t, s, r, m) => n.setCondition(t, s, r, m),
  remove_condition: (n, t) => n.removeCondition(t),
  set_capacity: (n, k, q) => n.setCapacity(k, q),
  set_allocatable: (n, k, q) => n.setAllocatable(k, q),
  remove_resource: (n, k) => n.removeResource(k),
  set_node_info: (n, f, v) => n.setNodeInfo(f, v),
  set_addresses: (n, list) => n.setAddresses(list),
};

function applyOp(node, [name, ...args]) {
  assert.ok(Object.hasOwn(OPS, name), `unknown op ${name}`);
  OPS[name](node, ...args);
}

/** A part as the vectors compare it: conditions on type, status, reason and message (and $patch), an empty reason or message as absent. */
function comparable(part) {
  const p = structuredClone(part);
  for (const c of p.status?.conditions ?? []) {
    for (const k of Object.keys(c)) {
      if (!['type', 'status', 'reason', 'message', '$patch'].includes(k) || (k !== 'type' && c[k] === '')) delete c[k];
    }
  }
  return p;
}

const parts = vectors('part.json');

test('a setter returns its part as the vectors say', () => {
  for (const c of cases(parts, 'cases')) {
    // Through the node API, and through the export that defineSetter makes.
    const node = new Node(structuredClone(parts.node));
    for (const op of c.ops) applyOp(node, op);
    assert.deepEqual(comparable(node.part()), c.part, c.name);
    const setter = defineSetter({
      metadata: { name: 'conformance' },
      set(n) {
        for (const op of c.ops) applyOp(n, op);
      },
    });
    assert.deepEqual(comparable(JSON.parse(setter.set(JSON.stringify(parts.node)))), c.part, c.name);
  }
});
