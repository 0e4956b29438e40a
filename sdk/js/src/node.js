// The Node: labels, annotations, capacity, nodeInfo, addresses and conditions
// (with the kubelet's heartbeat and transition rules).

import { ConditionStatus, conditionStatus } from './condition.js';
import { clone, deepEqual, isObject } from './json.js';
import { Quantity, quantityString } from './quantity.js';
import { now } from './time.js';

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
