#!/usr/bin/env node
// Builds a JavaScript setter into a nodestatus plugin (a WebAssembly component
// of the world `nodestatus:plugin/plugin@0.2.1`) with componentize-js:
//
//   node build.mjs [--out NAME.wasm] [--wit DIR] [--modules DIR] [--cache DIR] [--types DIR] [--debug-build | --aot [--weval BIN]] SETTER.js
//
// 1. bundles SETTER.js and what it imports (./nodestatus.js, ./host.js, npm
//    packages) into one ES module with esbuild (componentize-js does not
//    follow imports outside the entry's folder);
// 2. writes a WIT world that is the `plugin` world of wit/plugin.wit (or,
//    for a setter that exports `reactor` beside `setter`, the world
//    `reactor-plugin`: defineReactor) plus the WASI filesystem imports that
//    ./host.js reads granted files with (from jco's copy of the WASI WIT);
// 3. runs componentize-js (SpiderMonkey; `http` and `fetch-event` disabled)
//    and writes the component by write-then-rename, and its source map
//    beside it (OUT.map). The map is also embedded in the bundle, so the
//    errors a setter reports name the author's file and line, not the
//    bundle's (./sourcemap.js).
//
// --wit: the wit/ directory of this repository (or a copy of it, with its
//   deps/: plugin.wit is the package nodestatus:plugin@0.2.1, and
//   deps/plugin-0.1/setter.wit the host interface it imports); default: the
//   nearest `wit/` with a plugin.wit above SETTER.js, else ../../wit next to
//   this file.
// --modules: the node_modules folder with the pinned tools (package.json in
//   this folder); default: $NODESTATUS_JS_MODULES, else the nearest
//   node_modules above the current folder, SETTER.js or this file.
// --types DIR: also write TypeScript declarations of the world (jco's type
//   generator) to DIR, for editors.
// --cache DIR: keep built components in DIR, keyed by the sha256 of the
//   bundle, the world, this script and the tool versions, and reuse them (componentize
//   takes tens of seconds; bundling, milliseconds).
// --out: default: the plugin's name from its folder, `<folder>.wasm`.
// --debug-build: componentize-js's engine with its function names (2 MiB
//   more), so that a profile names SpiderMonkey's functions (run the engine
//   with NODESTATUS_PERFMAP=1 under `perf`: docs/benchmarks.md).
// --aot: compile the setter's JavaScript ahead of time with weval (the
//   WebAssembly partial evaluator) instead of interpreting it: a call on a
//   kept instance (`reuseInstance: true`) takes about two thirds of the time;
//   the component is 5 MiB larger, and a fresh instance, a compile and a
//   load take longer (docs/first-setter-javascript.md has the figures).
// --weval BIN: the weval 0.5.0 binary for --aot; default: $NODESTATUS_WEVAL,
//   else componentize-js downloads it from GitHub. Without internet access,
//   `cargo install weval --version 0.5.0 --locked` (what scripts/guests/js.sh
//   does with NODESTATUS_JS_AOT=1).

import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync, mkdirSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** The WASI version that componentize-js 0.23's engine imports; ./host.js imports the same. */
const WASI = '0.2.12';
const HERE = dirname(fileURLToPath(import.meta.url));

function fail(msg) {
  console.error(`build.mjs: ${msg}`);
  process.exit(1);
}

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string', short: 'o' },
    wit: { type: 'string' },
    modules: { type: 'string' },
    types: { type: 'string' },
    cache: { type: 'string' },
    'debug-build': { type: 'boolean' },
    aot: { type: 'boolean' },
    weval: { type: 'string' },
    quiet: { type: 'boolean', short: 'q' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opts.help || positionals.length !== 1) {
  console.error('usage: node build.mjs [--out NAME.wasm] [--wit DIR] [--modules DIR] [--cache DIR] [--types DIR] [--debug-build | --aot [--weval BIN]] SETTER.js');
  process.exit(opts.help ? 0 : 2);
}
if (opts.aot && opts['debug-build']) fail('--aot and --debug-build cannot go together: the AOT engine has no debug build');
if (opts.weval !== undefined && !opts.aot) fail('--weval is for --aot builds only');
const wevalBin = opts.aot ? (opts.weval ?? process.env.NODESTATUS_WEVAL) : undefined;
if (opts.aot && wevalBin !== undefined && !existsSync(wevalBin)) {
  fail(`${wevalBin}: no such file (--weval wants weval 0.5.0: cargo install weval --version 0.5.0 --locked)`);
}
const entry = resolve(positionals[0]);
if (!existsSync(entry)) fail(`${entry}: no such file`);

function* upwards(dir) {
  for (let d = resolve(dir); ; d = dirname(d)) {
    yield d;
    if (dirname(d) === d) return;
  }
}

function findModules() {
  const has = (d) => existsSync(join(d, '@bytecodealliance/componentize-js/package.json'));
  const given = opts.modules ?? process.env.NODESTATUS_JS_MODULES;
  if (given) {
    if (!has(given)) fail(`${given} has no @bytecodealliance/componentize-js (run npm ci there)`);
    return resolve(given);
  }
  for (const start of [process.cwd(), dirname(entry), HERE]) {
    for (const d of upwards(start)) {
      if (has(join(d, 'node_modules'))) return join(d, 'node_modules');
    }
  }
  fail('no node_modules with @bytecodealliance/componentize-js found; run `npm ci` next to package.json, or pass --modules');
}

/** The WIT directory: plugin.wit (the root package) and deps/ (the packages it uses). */
function findWit() {
  const isWitDir = (d) => existsSync(join(d, 'plugin.wit'));
  if (opts.wit) {
    const p = resolve(opts.wit);
    const d = existsSync(p) && !statSync(p).isDirectory() ? dirname(p) : p;
    if (!isWitDir(d)) {
      fail(`${p}: not a WIT directory with plugin.wit (--wit wants the whole wit/ directory, with its deps/, of nodestatus 0.2 or later)`);
    }
    return d;
  }
  for (const d of upwards(dirname(entry))) {
    if (isWitDir(join(d, 'wit'))) return join(d, 'wit');
  }
  const repo = join(HERE, '../../wit');
  if (isWitDir(repo)) return repo;
  fail('no wit/ directory with plugin.wit found above the setter; copy the whole wit/ directory from the nodestatus repository or pass --wit');
}

/** Every file under dir, as paths relative to it, sorted. */
function filesUnder(dir, rel = '') {
  const out = [];
  for (const e of readdirSync(join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const r = rel ? join(rel, e.name) : e.name;
    if (e.isDirectory()) out.push(...filesUnder(dir, r));
    else out.push(r);
  }
  return out;
}

/** The file a package's `import` resolves to (ESM or CommonJS). */
function packageEntry(modules, name) {
  const dir = join(modules, name);
  const pj = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  let e = pj.exports;
  if (e && typeof e === 'object' && '.' in e) e = e['.'];
  while (e && typeof e === 'object') e = e.import ?? e.node ?? e.default;
  return pathToFileURL(join(dir, e ?? pj.module ?? pj.main ?? 'index.js')).href;
}

const modules = findModules();
const pluginWit = findWit();
const pluginPackage = /^package\s+(nodestatus:plugin@[^;\s]+)\s*;/m.exec(readFileSync(join(pluginWit, 'plugin.wit'), 'utf8'))?.[1];
if (!pluginPackage) fail(`${join(pluginWit, 'plugin.wit')}: no \`package nodestatus:plugin@...;\` line`);
const wasiWit = join(modules, `@bytecodealliance/jco/lib/wit/builtin/${WASI}`);
if (!existsSync(wasiWit)) fail(`${wasiWit}: missing (is @bytecodealliance/jco installed at the pinned version?)`);

const out = resolve(opts.out ?? `${basename(dirname(entry))}.wasm`);
const work = mkdtempSync(join(tmpdir(), 'nodestatus-js-'));
const say = (m) => opts.quiet || console.error(m);

try {
  // The world: the plugin contract plus WASI filesystem (for granted paths).
  // The plugin's root package goes into deps/ beside the packages it uses
  // (a deps/ folder holds packages one level deep).
  const wit = join(work, 'wit');
  mkdirSync(join(wit, 'deps/nodestatus-plugin'), { recursive: true });
  for (const f of readdirSync(pluginWit).filter((f) => f.endsWith('.wit'))) {
    cpSync(join(pluginWit, f), join(wit, 'deps/nodestatus-plugin', f));
  }
  if (existsSync(join(pluginWit, 'deps'))) {
    for (const d of readdirSync(pluginWit + '/deps')) {
      cpSync(join(pluginWit, 'deps', d), join(wit, 'deps', `nodestatus-${d}`), { recursive: true });
    }
  }
  for (const p of ['wasi-io', 'wasi-clocks', 'wasi-filesystem']) {
    cpSync(join(wasiWit, p), join(wit, 'deps', p), { recursive: true });
  }

  const t0 = Date.now();
  const esbuild = await import(packageEntry(modules, 'esbuild'));
  const bundle = join(work, 'setter.bundle.js');
  const built = await (esbuild.build ?? esbuild.default.build)({
    entryPoints: [entry],
    // Its exports: a setter that exports `reactor` is of the world
    // reactor-plugin (WIT 0.2.1), any other of the world plugin.
    metafile: true,
    outfile: bundle,
    // Paths in the bundle's comments are relative to this: the same bundle
    // (and cache key) from whatever directory the build runs.
    absWorkingDir: dirname(entry),
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    external: ['nodestatus:*', 'wasi:*'],
    logLevel: 'warning',
    // The map goes into the bundle (for ./sourcemap.js, which maps the
    // errors a setter reports back to the author's files) and beside the
    // component (OUT.map).
    sourcemap: 'external',
    sourcesContent: false,
  });
  const map = JSON.parse(readFileSync(`${bundle}.map`, 'utf8'));
  // Sources relative to the setter's folder (`setter.js`,
  // `../../sdk/js/host.js`), not to the temporary bundle's.
  map.sources = map.sources.map((s) => relative(dirname(entry), resolve(dirname(bundle), s)) || s);
  writeFileSync(
    bundle,
    `${readFileSync(bundle, 'utf8')}\nglobalThis[Symbol.for('nodestatus.sourceMap')] = ${JSON.stringify({ sources: map.sources, mappings: map.mappings })};\n`,
  );
  const t1 = Date.now();
  const exported = Object.values(built.metafile.outputs).find((o) => o.entryPoint)?.exports ?? [];
  const world = exported.includes('reactor') ? '/reactor-plugin@' : '/plugin@';
  say(`world: ${world.slice(1, -1)}`);

  writeFileSync(
    join(wit, 'world.wit'),
    `// Generated by sdk/js/build.mjs: the plugin world (reactor-plugin for a
// setter that exports \`reactor\`), plus the WASI filesystem imports that
// sdk/js/host.js reads granted files with.
package nodestatus:js-plugin@0.1.0;

world plugin {
    include ${pluginPackage.replace('@', world)};
    import wasi:filesystem/preopens@${WASI};
    import wasi:filesystem/types@${WASI};
}
`,
  );

  if (opts.types) {
    // jco 1.35's `jco types` CLI gives its WASI sandbox no preopened
    // directory, so it cannot read any WIT; its library can, given one.
    const shim = join(modules, '@bytecodealliance/jco-transpile/node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js');
    const shimTop = join(modules, '@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js');
    const fsShim = await import(pathToFileURL(existsSync(shim) ? shim : shimTop).href);
    fsShim._setPreopens({ '/': '/' });
    const { generateGuestTypes } = await import(packageEntry(modules, '@bytecodealliance/jco-transpile'));
    const dest = resolve(opts.types);
    const files = await generateGuestTypes(wit, { worldName: 'plugin', outDir: '' });
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dest, name)), { recursive: true });
      writeFileSync(join(dest, name), text);
    }
    say(`types: ${Object.keys(files).length} files in ${dest}`);
  }

  const version = (name) => JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')).version;
  const key = createHash('sha256');
  for (const part of [
    readFileSync(bundle),
    readFileSync(join(wit, 'world.wit')),
    ...filesUnder(pluginWit).flatMap((f) => [f, readFileSync(join(pluginWit, f))]),
    readFileSync(fileURLToPath(import.meta.url)), // the build's own options
    `componentize-js ${version('@bytecodealliance/componentize-js')} jco ${version('@bytecodealliance/jco')} node ${process.versions.node}`,
    opts['debug-build'] ? 'debug-build' : '',
    opts.aot ? 'aot' : '',
  ]) {
    key.update(part).update('\0');
  }
  const cached = opts.cache && join(resolve(opts.cache), `${key.digest('hex')}.wasm`);

  let component;
  let how;
  if (cached && existsSync(cached)) {
    component = readFileSync(cached);
    const t = new Date();
    utimesSync(cached, t, t); // marks it used, for pruning by age
    how = 'unchanged, from the cache';
  } else {
    const { componentize } = await import(packageEntry(modules, '@bytecodealliance/componentize-js'));
    // componentize-js 0.23 strips the current directory off the source's path
    // when it is a prefix of it, and cuts one character too many when that
    // directory is `/`: run it from the bundle's own folder.
    const cwd = process.cwd();
    process.chdir(work);
    try {
      ({ component } = await componentize({
        sourcePath: bundle,
        witPath: wit,
        worldName: 'plugin',
        // Keep stdio (uncaught errors go to stderr, which the host logs at
        // debug), random (Math.random) and clocks (Date, for timestamps).
        disableFeatures: ['http', 'fetch-event'],
        // --debug-build: the engine with its function names, for profiles.
        debugBuild: Boolean(opts['debug-build']),
        // --aot: weval; componentize-js fetches it when no binary is given.
        ...(opts.aot ? { enableAot: true, wevalBin: wevalBin && resolve(wevalBin) } : {}),
      }));
    } finally {
      process.chdir(cwd);
    }
    how = `bundle ${t1 - t0} ms, componentize${opts.aot ? ' (AOT)' : ''} ${((Date.now() - t1) / 1000).toFixed(1)} s`;
    if (cached) {
      mkdirSync(dirname(cached), { recursive: true });
      writeFileSync(`${cached}.${process.pid}.tmp`, component);
      renameSync(`${cached}.${process.pid}.tmp`, cached);
    }
  }

  mkdirSync(dirname(out), { recursive: true });
  const tmp = join(dirname(out), `.${basename(out)}.${process.pid}.tmp`);
  writeFileSync(tmp, component);
  renameSync(tmp, out);
  writeFileSync(`${out}.map`, JSON.stringify(map));
  say(`${out}: ${(component.length / 1048576).toFixed(1)} MiB (${how})`);
} catch (e) {
  // esbuild has already printed its errors; others get their message only.
  if (!Array.isArray(e?.errors)) console.error(`build.mjs: ${entry}: ${e?.message ?? e}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
