// The Node: labels, annotations, capacity, nodeInfo, addresses and conditions
// (with the kubelet's heartbeat and transition rules), and the part of it that
// a setter sets (WIT `nodestatus:plugin@0.2.1`).

import { ConditionStatus, conditionStatus } from './condition.js';
import { clone, deepEqual, isObject } from './json.js';
import { Quantity, quantityString } from './quantity.js';
import { now } from './time.js';

/** The keyed sections of `status`: each key (each condition, by type) is a field of its own. */
export const KEYED_STATUS = ['capacity', 'allocatable', 'nodeInfo', 'conditions'];

function conditionsOf(object) {
  const list = object?.status?.conditions;
  return Array.isArray(list) ? list.filter(isObject) : [];
}

/**
 * A `v1.Node`, parsed from the JSON the host passes to `set`.
 *
 * The node records which fields the setter writes, and `part()` is what a
 * 0.2 setter returns: every field written, even to the value the node already
 * held (a field left out is one the setter no longer sets, and the host
 * removes it). Reads after writes see the writes.
 *
 * - Labels, annotations, `capacity`, `allocatable` and `nodeInfo` keys and
 *   conditions (by type) are fields one by one: the helpers write them.
 * - Another key of `status` (`addresses`, ...) is one field: `setStatus`,
 *   `removeStatus`, `statusMut`.
 * - `statusMut`, `setStatus` and `removeStatus` of a keyed section
 *   (`capacity`, `allocatable`, `nodeInfo`, `conditions`) claim the whole
 *   section: every key in it after the call is in the part (and a key removed
 *   from it, as `null`).
 * - `node.object`, and what `status(key)` and `metadata(key)` return, are the
 *   node itself, to read. A change made there, outside the helpers, is one
 *   the SDK cannot attribute: the call fails with a message that names the
 *   field and the helper to use.
 */
export class Node {
  #object;
  /** `section.map` -> the keys written, in first-written order. */
  #maps = new Map();
  /** The condition types written, in first-written order. */
  #conditions = new Set();
  /** Claimed status keys -> the keys (condition types) the section held when claimed; null for a whole field. */
  #claims = new Map();
  /** The node when raw access began, to find changes made there. */
  #snapshot;

  /** Wraps a parsed Node object (it is changed in place). */
  constructor(object) {
    if (!isObject(object)) throw new TypeError('a Node must be a JSON object');
    for (const k of ['metadata', 'status']) {
      if (object[k] !== undefined && object[k] !== null && !isObject(object[k])) {
        throw new TypeError(`a Node's ${k} must be an object`);
      }
    }
    this.#object = object;
  }

  /**
   * The parsed JSON itself, to read anything the helpers do not cover. Change
   * the node through the helpers (`statusMut` for a status field of your own):
   * a change made here is not in the part, and a setter's call that made one
   * fails, naming it.
   */
  get object() {
    if (this.#snapshot === undefined) this.#snapshot = clone(this.#object);
    return this.#object;
  }

  /** Parses a Node's JSON. Throws on text that is not a JSON object, or whose metadata or status is not an object. */
  static parse(json) {
    return new Node(JSON.parse(json));
  }

  /** A Node with only a name, for tests and examples. */
  static named(name) {
    return new Node({ apiVersion: 'v1', kind: 'Node', metadata: { name }, status: {} });
  }

  /** The whole Node as JSON (not the part: see `part()`). */
  toJSON() {
    return this.#object;
  }

  /** The whole Node as JSON text. */
  toString() {
    return JSON.stringify(this.#object);
  }

  #section(name) {
    if (!isObject(this.#object[name])) this.#object[name] = {};
    return this.#object[name];
  }

  /** `metadata.name`. */
  get name() {
    const n = this.#object.metadata?.name;
    return typeof n === 'string' ? n : '';
  }

  /** A field of `metadata` (the live value: read it, do not change it). */
  metadata(key) {
    return this.object.metadata?.[key] ?? undefined;
  }

  /** A field of `status` (the live value: read it, do not change it; `statusMut` is for changing it). */
  status(key) {
    return this.object.status?.[key] ?? undefined;
  }

  #status(key) {
    return this.#object.status?.[key] ?? undefined;
  }

  #claim(key) {
    if (this.#claims.has(key)) return;
    let held = null;
    if (key === 'conditions') {
      held = conditionsOf(this.#object).map((c) => c.type).filter((t) => typeof t === 'string');
    } else if (KEYED_STATUS.includes(key)) {
      held = Object.keys(this.#map('status', key) ?? {});
    }
    this.#claims.set(key, held);
  }

  /**
   * Replaces a field of `status`, which the setter then sets. For a keyed
   * section (`capacity`, `allocatable`, `nodeInfo`, `conditions`), the setter
   * sets every key in it after the call.
   */
  setStatus(key, value) {
    this.#claim(key);
    if (!deepEqual(this.#status(key), value)) this.#section('status')[key] = clone(value);
  }

  /** Removes a field of `status` (its keys, for a keyed section); returns whether it was there. */
  removeStatus(key) {
    this.#claim(key);
    const s = this.#object.status;
    if (!isObject(s) || !Object.hasOwn(s, key)) return false;
    delete s[key];
    return true;
  }

  /**
   * A field of `status` to change in place, set to `defaultValue` first when
   * it is absent (default: an empty object). The setter sets the whole field;
   * for a keyed section (`capacity`, `allocatable`, `nodeInfo`, `conditions`),
   * every key in it after the call.
   */
  statusMut(key, defaultValue = {}) {
    this.#claim(key);
    const s = this.#section('status');
    if (s[key] === undefined || s[key] === null) s[key] = defaultValue;
    return s[key];
  }

  #map(section, key) {
    const m = this.#object[section]?.[key];
    return isObject(m) ? m : undefined;
  }

  #mapMut(section, key) {
    const s = this.#section(section);
    if (!isObject(s[key])) s[key] = {};
    return s[key];
  }

  #wrote(section, map, key) {
    const id = `${section}.${map}`;
    let keys = this.#maps.get(id);
    if (!keys) this.#maps.set(id, (keys = new Set()));
    keys.add(key);
  }

  #setIn(section, map, key, value) {
    if (typeof value !== 'string') {
      throw new TypeError(`${section}.${map}[${key}] must be a string, got ${typeof value}`);
    }
    this.#wrote(section, map, key);
    if (this.#map(section, map)?.[key] !== value) this.#mapMut(section, map)[key] = value;
  }

  #removeIn(section, map, key) {
    this.#wrote(section, map, key);
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

  /** Sets a label (in the part even when the node already has that value). */
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

  /** Sets an annotation (in the part even when the node already has that value). */
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
    const list = this.#status('conditions');
    return Array.isArray(list) ? clone(list) : [];
  }

  /** The condition of this type (a copy), or undefined. */
  condition(type) {
    const list = this.#status('conditions');
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
    this.#conditions.add(type);
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

  /**
   * Removes a condition; returns whether it was there. The part says so
   * (`{ type, $patch: 'delete' }`), whether or not it was.
   */
  removeCondition(type) {
    this.#conditions.add(type);
    const list = this.#status('conditions');
    if (!Array.isArray(list)) return false;
    const kept = list.filter((c) => !(isObject(c) && c.type === type));
    if (kept.length === list.length) return false;
    this.#object.status.conditions = kept;
    return true;
  }

  /**
   * This setter's part of the node (what a 0.2 setter returns): every field
   * written so far, at its value now, `null` for a removed key, a removed
   * condition as `{ type, $patch: 'delete' }`. No kind, apiVersion or name,
   * and no empty section: a setter that wrote nothing has the part `{}`.
   */
  part() {
    const part = {};
    const metadata = {};
    const status = {};
    for (const map of ['labels', 'annotations']) {
      const keys = this.#maps.get(`metadata.${map}`);
      if (keys?.size) metadata[map] = this.#mapPart('metadata', map, keys);
    }
    const conditions = this.#conditionsPart();
    if (conditions.length) status.conditions = conditions;
    for (const map of ['capacity', 'allocatable', 'nodeInfo']) {
      const keys = new Set(this.#maps.get(`status.${map}`) ?? []);
      if (this.#claims.has(map)) {
        for (const k of this.#claims.get(map) ?? []) keys.add(k);
        for (const k of Object.keys(this.#map('status', map) ?? {})) keys.add(k);
      }
      if (keys.size) status[map] = this.#mapPart('status', map, keys);
    }
    const s = isObject(this.#object.status) ? this.#object.status : {};
    for (const key of this.#claims.keys()) {
      if (!KEYED_STATUS.includes(key)) status[key] = Object.hasOwn(s, key) ? clone(s[key]) : null;
    }
    if (Object.keys(metadata).length) part.metadata = metadata;
    if (Object.keys(status).length) part.status = status;
    return part;
  }

  /** `part()` as JSON text. */
  partJson() {
    return JSON.stringify(this.part());
  }

  #mapPart(section, map, keys) {
    const m = this.#map(section, map) ?? {};
    const out = {};
    for (const k of keys) out[k] = Object.hasOwn(m, k) ? m[k] : null;
    return out;
  }

  #conditionsPart() {
    const types = new Set(this.#conditions);
    if (this.#claims.has('conditions')) {
      for (const t of this.#claims.get('conditions') ?? []) types.add(t);
      for (const c of conditionsOf(this.#object)) if (typeof c.type === 'string') types.add(c.type);
    }
    const live = new Map();
    for (const c of conditionsOf(this.#object)) if (!live.has(c.type)) live.set(c.type, c);
    return [...types].map((t) => (live.has(t) ? clone(live.get(t)) : { type: t, $patch: 'delete' }));
  }

  /**
   * The first change made through `node.object` (or a live value that
   * `status(key)` or `metadata(key)` returned) that no helper wrote, as a
   * path such as `metadata.labels[x]`; undefined when there is none. The
   * setter adapter fails the call on one.
   */
  untrackedChange() {
    if (this.#snapshot === undefined) return undefined;
    const before = this.#snapshot;
    const after = this.#object;
    const obj = (v, k) => (isObject(v) && isObject(v[k]) ? v[k] : {});
    const differs = (a, b, k) => Object.hasOwn(a, k) !== Object.hasOwn(b, k) || !deepEqual(a[k], b[k]);
    const keys = (a, b) => new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys(before, after)) {
      if (k !== 'metadata' && k !== 'status' && differs(before, after, k)) return k;
    }
    const [mb, ma] = [obj(before, 'metadata'), obj(after, 'metadata')];
    for (const k of keys(mb, ma)) {
      if (!differs(mb, ma, k)) continue;
      if (k !== 'labels' && k !== 'annotations') return `metadata.${k}`;
      const written = this.#maps.get(`metadata.${k}`) ?? new Set();
      const [b, a] = [obj(mb, k), obj(ma, k)];
      for (const key of keys(b, a)) if (differs(b, a, key) && !written.has(key)) return `metadata.${k}[${key}]`;
    }
    const [sb, sa] = [obj(before, 'status'), obj(after, 'status')];
    for (const k of keys(sb, sa)) {
      if (!differs(sb, sa, k) || this.#claims.has(k)) continue;
      if (k === 'conditions') {
        const index = (o) => new Map(conditionsOf(o).map((c) => [c.type, c]));
        const [cb, ca] = [index(before), index(after)];
        for (const t of new Set([...cb.keys(), ...ca.keys()])) {
          if (!deepEqual(cb.get(t), ca.get(t)) && !this.#conditions.has(t)) return `status.conditions[${t}]`;
        }
      } else if (KEYED_STATUS.includes(k)) {
        const written = this.#maps.get(`status.${k}`) ?? new Set();
        const [b, a] = [obj(sb, k), obj(sa, k)];
        for (const key of keys(b, a)) if (differs(b, a, key) && !written.has(key)) return `status.${k}[${key}]`;
      } else {
        return `status.${k}`;
      }
    }
    return undefined;
  }
}
