// nodestatus SDK for JavaScript setters: the counterpart of the Rust SDK in
// sdk/src (Node, ConditionStatus, Quantity, timestamps) and an adapter that
// turns `{ metadata, set }` into the `setter` export of the WIT world
// `nodestatus:plugin/plugin@0.2.1` (wit/plugin.wit, with wit/deps/), whose
// `set` returns the setter's part of the node: the fields it wrote.
//
// These modules import nothing from the host: they run the same under
// `node --test` and inside the component. The host's functions (log, config, events, files) are in
// ./host.js, which only the component (or ./testing.js's fake host) can load.
//
// One module per concern, under ./src: quantity.js, time.js, condition.js,
// node.js, setter.js (and json.js, the helpers they share). This file is the
// public entry point; import from it.

export { ConditionStatus } from './src/condition.js';
export { KEYED_STATUS, Node } from './src/node.js';
export { Quantity } from './src/quantity.js';
export { defineReactor, linesOf } from './src/reactor.js';
export { defineSetter, errorMessage, pluginInfo } from './src/setter.js';
export { now, rfc3339 } from './src/time.js';
