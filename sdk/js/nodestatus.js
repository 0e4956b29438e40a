// nodestatus SDK for JavaScript setters: the counterpart of the Rust SDK in
// sdk/src (Node, ConditionStatus, Quantity, timestamps) and an adapter that
// turns `{ metadata, set }` into the `setter` export of the WIT world
// `nodestatus:plugin/plugin@0.1.1` (wit/setter.wit).
//
// This module has no imports: it runs the same under `node --test` and inside
// the component. The host's functions (log, config, events, files) are in
// ./host.js, which only the component (or ./testing.js's fake host) can load.

/** A condition's status: `True`, `False` or `Unknown`. */
import { authorLocation, mapLocations } from './sourcemap.js';

export const ConditionStatus = Object.freeze({
  True: 'True',
  False: 'False',
  Unknown: 'Unknown',
  /** `True` when `b`, else `False`. */
  fromBool(b) {
    return b ? 'True' : 'False';
  },
  /** Whether `s` is one of the three statuses. */
  isValid(s) {
    return s === 'True' || s === 'False' || s === 'Unknown';
  },
});

function conditionStatus(s) {
  if (typeof s === 'boolean') return ConditionStatus.fromBool(s);
  if (!ConditionStatus.isValid(s)) {
    throw new TypeError(`${JSON.stringify(s)} is not True, False or Unknown`);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Timestamps

function pad(n, w = 2) {
  return String(n).padStart(w, '0');
}

/** `2026-01-02T03:04:05Z`: a `metav1.Time`, the form of a condition's times. */
export function rfc3339(date) {
  const d = date instanceof Date ? date : new Date(date);
  return (
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` +
    `T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`
  );
}

/** The current time as {@link rfc3339} writes it. */
export function now() {
  return rfc3339(new Date());
}

// ---------------------------------------------------------------------------
// Quantities

const BINARY = [
  ['Ki', 10n],
  ['Mi', 20n],
  ['Gi', 30n],
  ['Ti', 40n],
  ['Pi', 50n],
  ['Ei', 60n],
];
const DECIMAL = [
  ['n', -9],
  ['u', -6],
  ['m', -3],
  ['k', 3],
  ['M', 6],
  ['G', 9],
  ['T', 12],
  ['P', 15],
  ['E', 18],
];

function toBigInt(n, what) {
  if (typeof n === 'bigint') return n;
  if (typeof n === 'number' && Number.isInteger(n)) return BigInt(n);
  throw new TypeError(`${what} must be an integer (number or bigint), got ${String(n)}`);
}

/**
 * A Kubernetes resource quantity (`2`, `1500m`, `16Gi`, `100M`), held exactly
 * in thousandths of a unit (as a BigInt), written in the canonical form the
 * API server uses.
 */
export class Quantity {
  /** @param {bigint} millis @param {'BinarySI'|'DecimalSI'} format */
  constructor(millis, format = 'DecimalSI') {
    if (format !== 'BinarySI' && format !== 'DecimalSI') {
      throw new TypeError(`format must be BinarySI or DecimalSI, got ${String(format)}`);
    }
    this.millisValue = toBigInt(millis, 'millis');
    this.format = format;
    Object.freeze(this);
  }

  /** Whole units, written in decimal (`cpu`, `pods`). */
  static units(n) {
    return new Quantity(toBigInt(n, 'units') * 1000n, 'DecimalSI');
  }

  /** Thousandths of a unit (`1500m` CPU). */
  static millis(m) {
    return new Quantity(toBigInt(m, 'millis'), 'DecimalSI');
  }

  /** A byte count, written in binary units (`memory`, `ephemeral-storage`). */
  static bytes(b) {
    const v = toBigInt(b, 'bytes');
    if (v < 0n) throw new RangeError(`bytes must not be negative, got ${v}`);
    return new Quantity(v * 1000n, 'BinarySI');
  }

  /**
   * Parses the API server's quantity syntax. Sub-milli fractions round up, as
   * the API server does. Throws an Error that shows an example on bad input.
   */
  static parse(s) {
    const err = () =>
      new Error(`${JSON.stringify(String(s))} is not a quantity (for example 2, 500m, 16Gi, 1.5G)`);
    if (typeof s !== 'string') throw err();
    const t = s.trim();
    if (t.length === 0 || t.length > 64) throw err();
    const m = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/.exec(t);
    if (!m) throw err();
    const [, sign, int, fracRaw, suffix] = m;
    const frac = fracRaw ?? '';
    if (int === '' && frac === '') throw err();
    let decExp = 0;
    let binExp = 0n;
    let format = 'DecimalSI';
    const bin = BINARY.find(([n]) => n === suffix);
    const dec = DECIMAL.find(([n]) => n === suffix);
    if (suffix === '') {
      // plain number
    } else if (bin) {
      binExp = bin[1];
      format = 'BinarySI';
    } else if (dec) {
      decExp = dec[1];
    } else if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
      decExp = Number.parseInt(suffix.slice(1), 10);
    } else {
      throw err();
    }
    const mantissa = BigInt((int + frac).replace(/^0+/, '') || '0');
    // millis = mantissa * 10^(decExp + 3 - frac.length) * 2^binExp
    const exp10 = decExp + 3 - frac.length;
    if (Math.abs(exp10) > 60) throw err();
    let scaled;
    if (exp10 >= 0) {
      scaled = mantissa * 10n ** BigInt(exp10);
    } else {
      const p = 10n ** BigInt(-exp10);
      scaled = (mantissa + p - 1n) / p; // round up, as resource.Quantity does
    }
    scaled *= 1n << binExp;
    if (scaled >= 1n << 126n) throw err(); // the Rust SDK's i128 range
    return new Quantity(sign === '-' ? -scaled : scaled, format);
  }

  /** The value in thousandths of a unit, as a BigInt. */
  asMillis() {
    return this.millisValue;
  }

  /** The value in whole units, rounded up, as a BigInt. */
  asUnitsCeil() {
    const m = this.millisValue;
    const q = m / 1000n;
    const r = m % 1000n;
    // BigInt division truncates toward zero; ceil differs only for a positive remainder.
    return r > 0n ? q + 1n : q;
  }

  /** The value as a Number in units (may lose precision above 2^53 milli-units). */
  toNumber() {
    return Number(this.millisValue) / 1000;
  }

  /** `this - other`, never below zero (the kubelet's allocatable rule). */
  saturatingSub(other) {
    const d = this.millisValue - other.millisValue;
    return new Quantity(d > 0n ? d : 0n, this.format);
  }

  /** `this + other`. */
  add(other) {
    return new Quantity(this.millisValue + other.millisValue, this.format);
  }

  /** Whether both hold the same value in the same format. */
  equals(other) {
    return (
      other instanceof Quantity &&
      other.millisValue === this.millisValue &&
      other.format === this.format
    );
  }

  /** -1, 0 or 1, by value. */
  compare(other) {
    const a = this.millisValue;
    const b = other.millisValue;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  /** The canonical form: the largest suffix that writes the value as a whole number. */
  toString() {
    const m = this.millisValue;
    if (m % 1000n !== 0n) return `${m}m`;
    const units = m / 1000n;
    if (units === 0n) return '0';
    if (this.format === 'BinarySI') {
      for (const [name, exp] of [...BINARY].reverse()) {
        const d = 1n << exp;
        if (units % d === 0n) return `${units / d}${name}`;
      }
      return `${units}`;
    }
    for (const [name, exp] of [...DECIMAL].reverse()) {
      if (exp <= 0) continue;
      const d = 10n ** BigInt(exp);
      if (units % d === 0n) return `${units / d}${name}`;
    }
    return `${units}`;
  }

  toJSON() {
    return this.toString();
  }
}

function quantityString(q) {
  if (q instanceof Quantity) return q.toString();
  if (typeof q === 'string') return Quantity.parse(q).toString();
  if (typeof q === 'number' || typeof q === 'bigint') return Quantity.units(q).toString();
  throw new TypeError(`expected a Quantity, a quantity string or an integer, got ${String(q)}`);
}

// ---------------------------------------------------------------------------
// Node

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

function clone(v) {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

/**
 * A `v1.Node`, parsed from the JSON the host passes to `set`. Every setter
 * is a no-op when the field already holds the value, so a pass that changes
 * nothing returns the node unchanged. The raw object is `node.object`.
 */
export class Node {
  /** Wraps a parsed Node object (it is changed in place). */
  constructor(object) {
    if (!isObject(object)) throw new TypeError('a Node must be a JSON object');
    for (const k of ['metadata', 'status']) {
      if (object[k] !== undefined && object[k] !== null && !isObject(object[k])) {
        throw new TypeError(`a Node's ${k} must be an object`);
      }
    }
    this.object = object;
  }

  /** Parses a Node's JSON. Throws on text that is not a JSON object, or whose metadata or status is not an object. */
  static parse(json) {
    return new Node(JSON.parse(json));
  }

  /** A Node with only a name, for tests and examples. */
  static named(name) {
    return new Node({ apiVersion: 'v1', kind: 'Node', metadata: { name }, status: {} });
  }

  /** The Node as JSON. */
  toJSON() {
    return this.object;
  }

  /** The Node as JSON text. */
  toString() {
    return JSON.stringify(this.object);
  }

  #section(name) {
    if (!isObject(this.object[name])) this.object[name] = {};
    return this.object[name];
  }

  /** `metadata.name`. */
  get name() {
    const n = this.object.metadata?.name;
    return typeof n === 'string' ? n : '';
  }

  /** A field of `metadata` (the live value; do not change it, use the setters). */
  metadata(key) {
    return this.object.metadata?.[key] ?? undefined;
  }

  /** A field of `status` (the live value; do not change it, use the setters). */
  status(key) {
    return this.object.status?.[key] ?? undefined;
  }

  /** Replaces a field of `status`, unless it already holds an equal value. */
  setStatus(key, value) {
    if (!deepEqual(this.status(key), value)) this.#section('status')[key] = clone(value);
  }

  /** Removes a field of `status`; returns whether it was there. */
  removeStatus(key) {
    const s = this.object.status;
    if (!isObject(s) || !Object.hasOwn(s, key)) return false;
    delete s[key];
    return true;
  }

  #map(section, key) {
    const m = this.object[section]?.[key];
    return isObject(m) ? m : undefined;
  }

  #mapMut(section, key) {
    const s = this.#section(section);
    if (!isObject(s[key])) s[key] = {};
    return s[key];
  }

  #setIn(section, map, key, value) {
    if (typeof value !== 'string') {
      throw new TypeError(`${section}.${map}[${key}] must be a string, got ${typeof value}`);
    }
    if (this.#map(section, map)?.[key] !== value) this.#mapMut(section, map)[key] = value;
  }

  #removeIn(section, map, key) {
    const m = this.#map(section, map);
    if (!m || !Object.hasOwn(m, key)) return false;
    delete m[key];
    return true;
  }

  #getIn(section, map, key) {
    const v = this.#map(section, map)?.[key];
    return typeof v === 'string' ? v : undefined;
  }

  /** A label's value, or undefined. */
  label(key) {
    return this.#getIn('metadata', 'labels', key);
  }

  /** All labels (a copy). */
  labels() {
    return { ...(this.#map('metadata', 'labels') ?? {}) };
  }

  /** Sets a label (a no-op when it already has that value). */
  setLabel(key, value) {
    this.#setIn('metadata', 'labels', key, value);
  }

  /** Removes a label; returns whether it was there. */
  removeLabel(key) {
    return this.#removeIn('metadata', 'labels', key);
  }

  /** An annotation's value, or undefined. */
  annotation(key) {
    return this.#getIn('metadata', 'annotations', key);
  }

  /** All annotations (a copy). */
  annotations() {
    return { ...(this.#map('metadata', 'annotations') ?? {}) };
  }

  /** Sets an annotation (a no-op when it already has that value). */
  setAnnotation(key, value) {
    this.#setIn('metadata', 'annotations', key, value);
  }

  /** Removes an annotation; returns whether it was there. */
  removeAnnotation(key) {
    return this.#removeIn('metadata', 'annotations', key);
  }

  #quantity(map, name) {
    const s = this.#getIn('status', map, name);
    if (s === undefined) return undefined;
    try {
      return Quantity.parse(s);
    } catch {
      return undefined;
    }
  }

  /** `status.capacity[name]` as a Quantity, or undefined. */
  capacity(name) {
    return this.#quantity('capacity', name);
  }

  /** `status.allocatable[name]` as a Quantity, or undefined. */
  allocatable(name) {
    return this.#quantity('allocatable', name);
  }

  /** Sets `status.capacity[name]` from a Quantity, a quantity string or a whole number. */
  setCapacity(name, q) {
    this.#setIn('status', 'capacity', name, quantityString(q));
  }

  /** Sets `status.allocatable[name]` from a Quantity, a quantity string or a whole number. */
  setAllocatable(name, q) {
    this.#setIn('status', 'allocatable', name, quantityString(q));
  }

  /** Removes `status.capacity[name]` and `status.allocatable[name]`; returns whether either was there. */
  removeResource(name) {
    const a = this.#removeIn('status', 'capacity', name);
    const b = this.#removeIn('status', 'allocatable', name);
    return a || b;
  }

  /** `status.nodeInfo.<field>`, or undefined. */
  nodeInfo(field) {
    return this.#getIn('status', 'nodeInfo', field);
  }

  /** Sets `status.nodeInfo.<field>`. */
  setNodeInfo(field, value) {
    this.#setIn('status', 'nodeInfo', field, value);
  }

  /** Replaces `status.addresses` with `[type, address]` pairs or `{type, address}` objects. */
  setAddresses(addresses) {
    const list = addresses.map((a) =>
      Array.isArray(a) ? { type: a[0], address: a[1] } : { type: a.type, address: a.address },
    );
    this.setStatus('addresses', list);
  }

  /** All conditions (copies). */
  conditions() {
    const list = this.status('conditions');
    return Array.isArray(list) ? clone(list) : [];
  }

  /** The condition of this type (a copy), or undefined. */
  condition(type) {
    const list = this.status('conditions');
    if (!Array.isArray(list)) return undefined;
    return clone(list.find((c) => isObject(c) && c.type === type));
  }

  /**
   * Sets a condition with the kubelet's rules:
   * - `lastHeartbeatTime` is `now` on every call;
   * - a new condition, or one whose status flips, gets `lastTransitionTime` =
   *   `now`; otherwise the transition time is kept;
   * - reason and message are replaced;
   * - a new condition is appended (so a setter that runs last puts its
   *   condition last).
   *
   * `status` is `'True'`, `'False'`, `'Unknown'` (see ConditionStatus) or a
   * boolean. `now` defaults to the current time (RFC 3339, seconds).
   *
   * Returns `{ previous, current, flipped }`: `previous` is undefined for a new
   * condition, and `flipped` (a new condition counts) is when the kubelet
   * records an event.
   */
  setCondition(type, status, reason = '', message = '', nowTime = now()) {
    if (typeof type !== 'string' || type === '') throw new TypeError('a condition type must be a non-empty string');
    const current = conditionStatus(status);
    const s = this.#section('status');
    if (!Array.isArray(s.conditions)) s.conditions = [];
    const list = s.conditions;
    const i = list.findIndex((c) => isObject(c) && c.type === type);
    const existing = i >= 0 ? list[i] : undefined;
    const previous =
      existing && ConditionStatus.isValid(existing.status) ? existing.status : undefined;
    const flipped = previous !== current;
    const transition =
      existing && !flipped && typeof existing.lastTransitionTime === 'string'
        ? existing.lastTransitionTime
        : nowTime;
    const next = {
      type,
      status: current,
      lastHeartbeatTime: nowTime,
      lastTransitionTime: transition,
      reason: String(reason),
      message: String(message),
    };
    if (i >= 0) list[i] = next;
    else list.push(next);
    return { previous, current, flipped };
  }

  /** Removes a condition; returns whether it was there. */
  removeCondition(type) {
    const list = this.status('conditions');
    if (!Array.isArray(list)) return false;
    const kept = list.filter((c) => !(isObject(c) && c.type === type));
    if (kept.length === list.length) return false;
    this.object.status.conditions = kept;
    return true;
  }
}

// ---------------------------------------------------------------------------
// The setter export

const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Fills in a plugin's metadata (`plugin-info`) with defaults and checks it:
 * `{ name, version, description = '', paths = [], env = [], affectsReadiness = false }`.
 */
export function pluginInfo(m) {
  if (!isObject(m)) throw new TypeError('metadata must be an object');
  const info = {
    name: m.name,
    version: m.version ?? '0.0.0',
    description: m.description ?? '',
    paths: [...(m.paths ?? [])],
    env: [...(m.env ?? [])],
    affectsReadiness: Boolean(m.affectsReadiness),
  };
  if (typeof info.name !== 'string' || !NAME.test(info.name)) {
    throw new TypeError(
      `metadata.name ${JSON.stringify(info.name)} must be lowercase letters, digits and '-', at most 63 bytes`,
    );
  }
  for (const p of info.paths) {
    if (typeof p !== 'string' || !p.startsWith('/')) {
      throw new TypeError(`metadata.paths: ${JSON.stringify(p)} is not an absolute path`);
    }
  }
  for (const k of ['version', 'description']) {
    if (typeof info[k] !== 'string') throw new TypeError(`metadata.${k} must be a string`);
  }
  return info;
}

/** The message of anything thrown: an Error's message, a string as is. */
export function errorMessage(e) {
  if (typeof e === 'string') return e;
  if (e instanceof Error) {
    // In a component built by build.mjs: where, in the author's files.
    const at = authorLocation(e.stack);
    return `${e.message || e.name}${at ? ` (at ${at})` : ''}`;
  }
  if (isObject(e) && typeof e.payload === 'string') return e.payload;
  try {
    return JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

/**
 * Turns `{ metadata, set }` into the `setter` export of the WIT world:
 *
 * ```js
 * export const setter = defineSetter({
 *   metadata: { name: 'my-setter', version: '0.1.0', paths: ['/proc'] },
 *   set(node) { node.setLabel('example.com/x', 'y'); },
 * });
 * ```
 *
 * `metadata` is an object (or a function returning one); see {@link pluginInfo}.
 * `set(node)` receives a {@link Node} and changes it in place (its return
 * value is ignored, unless it is another Node, which is then returned). Anything
 * it throws becomes the `err` result with the error's message, so the host
 * discards the output and reports the message. `set` must be synchronous.
 */
export function defineSetter({ metadata, set }) {
  if (typeof set !== 'function') throw new TypeError('defineSetter needs a set(node) function');
  const info = () => pluginInfo(typeof metadata === 'function' ? metadata() : metadata);
  if (typeof metadata !== 'function') info(); // fail at once, and in unit tests, on bad metadata
  return {
    metadata() {
      try {
        return info();
      } catch (e) {
        // A failed metadata() traps, and the engine logs what it printed:
        // say where, in the author's files.
        const err = new Error(`metadata() failed: ${errorMessage(e)}`);
        err.stack = mapLocations(String(e?.stack ?? ''));
        throw err;
      }
    },
    set(json) {
      // componentize-js turns a thrown string into the `err` result (a thrown
      // Error object would trap instead), so every failure is thrown as one.
      let node;
      try {
        node = Node.parse(json);
      } catch (e) {
        throw `the host passed a node that is not a Node object: ${errorMessage(e)}`;
      }
      let out;
      try {
        out = set(node);
      } catch (e) {
        throw errorMessage(e);
      }
      if (out && typeof out.then === 'function') {
        throw 'set() returned a Promise: a setter must be synchronous (the host API is)';
      }
      return (out instanceof Node ? out : node).toString();
    },
  };
}
