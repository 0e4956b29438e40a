//! Small hand-written WAT components that implement the `plugin` world (or
//! pretend to) and misbehave in `set` or `metadata`, so that hostile-plugin
//! tests need no guest toolchain and control the exact shape of the attack.
//!
//! Every component has the same skeleton: a core module that owns the memory
//! and `realloc`, a main core module that imports that memory (and, when a
//! behaviour needs them, WASI's clock and poll functions or the host's `log`,
//! `record-event` and `statvfs`), extra core instances for the memory and
//! table bombs, and a shim that exports `nodestatus:plugin/setter@0.1.0`
//! (or `@0.2.0`: [`part_component`]).
//!
//! Each failure at the guest boundary has a component here that causes it
//! (the kind it gets in brackets): [`Behaviour::Trap`] and
//! [`Behaviour::Recurse`] (`Trap`), [`Behaviour::Spin`] and
//! [`Behaviour::Sleep`] (`Timeout`), [`Behaviour::GrowMemory`],
//! [`Behaviour::GrowTables`] and [`Behaviour::ManyMemories`] (`Memory`),
//! [`Behaviour::ReturnBytes`] and [`Behaviour::OutOfBounds`]
//! (`InvalidResult`), [`Behaviour::HugeOutput`] (`OutputTooLarge`),
//! [`Behaviour::Return`] with text that is not a Node (`Output`) or a Node
//! that changes a protected field (`Policy`), [`Behaviour::Statvfs`] of a
//! path not granted or [`Behaviour::ContainerRuntime`] without
//! `containerRuntime` (`Ungranted`), and at load a `metadata` that returns an
//! unreadable record (`OutOfBounds`) or a name that is not one
//! ([`component`] with an invalid name: `LoadError::BadMetadata`).

/// How the component's `set` (or `metadata`) misbehaves.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Loops forever.
    Spin,
    /// Grows memory by 1 MiB at a time, forever.
    GrowMemory,
    /// Executes `unreachable`.
    Trap,
    /// Returns `Ok` with this text.
    Return(String),
    /// Returns `Err` with this text.
    Fail(String),
    /// Returns its input with the byte at offset `at` flipped between `a`
    /// and `b`: valid output that changes on every call (a flapping setter;
    /// it needs no state, as every call gets a fresh instance).
    Toggle {
        /// Offset of the byte in the input node's JSON.
        at: u32,
        /// One value of the byte.
        a: u8,
        /// The other.
        b: u8,
    },
    /// Counts its calls in its own memory and returns its input with the
    /// byte at offset `at` set to the count as a digit (`'1'` for the
    /// first call of an instance); traps at call `trap_at`. Shows whether an
    /// instance served more than one call.
    Count {
        /// Offset of the byte in the input node's JSON.
        at: u32,
        /// The call that traps (0: none).
        trap_at: u8,
    },
    /// Returns its input unchanged.
    Echo,
    /// A 0.2 component ([`part_component`]): returns `ok(none)`, the node
    /// holds its part. A 0.1 one echoes.
    Held,
    /// Blocks in a host call: subscribes to a monotonic-clock timer of one
    /// hour and blocks on the pollable (`wasi:io/poll`).
    Sleep,
    /// Recurses without end (stack overflow).
    Recurse,
    /// Has `instances` extra core instances, each with its own memory of
    /// `mib` MiB whose every page it touches at instantiation; then echoes.
    ManyMemories {
        /// Extra core instances, one memory each.
        instances: u32,
        /// Size of each memory.
        mib: u32,
    },
    /// Has `instances` extra core instances of 8 tables each, grows every
    /// table by a million funcrefs, then echoes.
    GrowTables {
        /// Extra core instances, 8 tables each.
        instances: u32,
    },
    /// Returns this many bytes of JSON whitespace followed by `{}`.
    HugeOutput(u32),
    /// Returns `Ok` with these bytes as the string (for invalid UTF-8).
    ReturnBytes(Vec<u8>),
    /// Returns `Ok` with a string pointer and length outside its memory (as
    /// `metadata`: a record whose name lies outside its memory).
    OutOfBounds,
    /// Asks for this path in its metadata, and calls the host's `statvfs`
    /// on it; returns the host's error as its own, or its input unchanged
    /// when the call succeeds.
    Statvfs(String),
    /// Calls the host's `container-runtime` (WIT 0.1.1); returns the message
    /// of the host's error as its own, or its input unchanged when the call
    /// succeeds.
    ContainerRuntime,
    /// Logs `lines` lines of `text` and records `events` events with it as
    /// the message, then echoes.
    Flood {
        /// Log lines per call.
        lines: u32,
        /// Events per call.
        events: u32,
        /// The text of each.
        text: String,
    },
}

const META: u32 = 2048;
/// A second `plugin-info` record, whose name lies outside the memory.
const META_OOB: u32 = 2112;
/// The `paths` list of the metadata: one string, the payload.
const PATHS: u32 = 2176;
const RET: u32 = 3072;
/// The return area of `statvfs` (`result<fs-stats, string>`, 56 bytes) or
/// of `container-runtime` (`result<container-runtime-info, runtime-error>`,
/// 52 bytes).
const CALL_RET: u32 = 3328;
const REASON: u32 = 3200;
const STR: u32 = 256;
/// [`Behaviour::Count`]'s counter.
const COUNTER: u32 = 3584;
const PAYLOAD: u32 = 4096;
/// Where `HugeOutput` writes, past anything `realloc` hands out for a small
/// node.
const HUGE_AT: u32 = 8 << 20;

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A component named `name` whose `set` does `behaviour`.
pub fn component(name: &str, behaviour: &Behaviour) -> Vec<u8> {
    component_with_metadata(name, None, behaviour)
}

/// A component of WIT 0.2 named `name` whose `set` does `behaviour`: it
/// exports `nodestatus:plugin/setter@0.2.0`, and what `set` gives back
/// (`Return`'s text, the echoed node, ...) is its part.
pub fn part_component(name: &str, behaviour: &Behaviour) -> Vec<u8> {
    build(name, None, behaviour, true)
}

/// A component named `name` whose `metadata` does `metadata` (`Spin`, `Trap`
/// or `Sleep`; `None` answers normally) and whose `set` does `set`.
pub fn component_with_metadata(
    name: &str,
    metadata: Option<&Behaviour>,
    set: &Behaviour,
) -> Vec<u8> {
    build(name, metadata, set, false)
}

/// The component: of WIT 0.2 with `part`, else of 0.1.0.
fn build(name: &str, metadata: Option<&Behaviour>, set: &Behaviour, part: bool) -> Vec<u8> {
    let version = b"0.0.1";
    let (name_off, ver_off) = (STR, STR + name.len() as u32);
    let payload: Vec<u8> = match set {
        Behaviour::Return(s) | Behaviour::Fail(s) | Behaviour::Statvfs(s) => s.as_bytes().to_vec(),
        Behaviour::ReturnBytes(b) => b.clone(),
        Behaviour::Flood { text, .. } => text.as_bytes().to_vec(),
        _ => Vec::new(),
    };
    // The input is copied above the payload; memory fits both.
    let heap = (PAYLOAD + payload.len() as u32 + 7).max(16384) & !7;
    let pages = (heap / 65536 + 2).max(2);
    // plugin-info: name, version, description, paths, env (ptr, len each), bool.
    let asks_path = matches!(set, Behaviour::Statvfs(_));
    let paths_list: Vec<u8> = match asks_path {
        true => [PAYLOAD, payload.len() as u32]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        false => Vec::new(),
    };
    let mut rec = Vec::new();
    for (ptr, len) in [
        (name_off, name.len() as u32),
        (ver_off, version.len() as u32),
        (0, 0),
        (PATHS, u32::from(asks_path)),
        (0, 0),
    ] {
        rec.extend(ptr.to_le_bytes());
        rec.extend(len.to_le_bytes());
    }
    rec.extend([0, 0, 0, 0]);
    // The same record with the name at the top of the address space.
    let mut rec_oob = rec.clone();
    rec_oob[..8].copy_from_slice(&[0, 0, 0xff, 0xff, 0xe8, 0x03, 0, 0]);
    let uses = |f: &dyn Fn(&Behaviour) -> bool| f(set) || metadata.is_some_and(f);
    let needs_wasi = uses(&|b| matches!(b, Behaviour::Sleep));
    let needs_host = uses(&|b| matches!(b, Behaviour::Flood { .. }));
    let needs_statvfs = uses(&|b| matches!(b, Behaviour::Statvfs(_)));
    let needs_runtime = uses(&|b| matches!(b, Behaviour::ContainerRuntime));
    let ret_ok = |ptr: &str, len: &str| {
        format!(
            "(i32.store8 (i32.const {RET}) (i32.const 0))
             (i32.store (i32.const {}) {ptr})
             (i32.store (i32.const {}) {len})
             (i32.const {RET})",
            RET + 4,
            RET + 8
        )
    };
    let echo = ret_ok("(local.get 0)", "(local.get 1)");
    let sleep = "(call $block (call $subscribe (i64.const 3600000000000))) unreachable".to_owned();
    let body = match set {
        Behaviour::Spin => "(loop $l (br $l)) unreachable".to_owned(),
        Behaviour::GrowMemory => {
            "(loop $l (drop (memory.grow (i32.const 16))) (br $l)) unreachable".to_owned()
        }
        Behaviour::Trap => "unreachable".to_owned(),
        Behaviour::Toggle { at, a, b } => format!(
            "(i32.store8 (i32.add (local.get 0) (i32.const {at}))
               (select (i32.const {b}) (i32.const {a})
                 (i32.eq (i32.load8_u (i32.add (local.get 0) (i32.const {at}))) (i32.const {a}))))
             (i32.store8 (i32.const {RET}) (i32.const 0))
             (i32.store (i32.const {r4}) (local.get 0))
             (i32.store (i32.const {r8}) (local.get 1))
             (i32.const {RET})",
            r4 = RET + 4,
            r8 = RET + 8,
        ),
        Behaviour::Count { at, trap_at } => format!(
            "(i32.store8 (i32.const {COUNTER}) (i32.add (i32.load8_u (i32.const {COUNTER})) (i32.const 1)))
             (if (i32.eq (i32.load8_u (i32.const {COUNTER})) (i32.const {trap_at})) (then unreachable))
             (i32.store8 (i32.add (local.get 0) (i32.const {at}))
               (i32.add (i32.const 48) (i32.load8_u (i32.const {COUNTER}))))
             {echo}"
        ),
        Behaviour::Return(_) | Behaviour::Fail(_) | Behaviour::ReturnBytes(_) => {
            let disc = u32::from(matches!(set, Behaviour::Fail(_)));
            format!(
                "(i32.store8 (i32.const {RET}) (i32.const {disc}))
                 (i32.store (i32.const {}) (i32.const {PAYLOAD}))
                 (i32.store (i32.const {}) (i32.const {}))
                 (i32.const {RET})",
                RET + 4,
                RET + 8,
                payload.len()
            )
        }
        Behaviour::Echo | Behaviour::Held | Behaviour::ManyMemories { .. } => echo.clone(),
        Behaviour::Sleep => sleep.clone(),
        Behaviour::Recurse => "(drop (call $recurse (i32.const 0))) unreachable".to_owned(),
        Behaviour::GrowTables { instances } => {
            let calls: String = (0..*instances)
                .map(|i| format!("(call $grow{i})"))
                .collect();
            format!("{calls} {echo}")
        }
        Behaviour::HugeOutput(n) => {
            let pages = (HUGE_AT as u64 + *n as u64 + 2).div_ceil(65536);
            format!(
                "(drop (memory.grow (i32.sub (i32.const {pages}) (memory.size))))
                 (memory.fill (i32.const {HUGE_AT}) (i32.const 32) (i32.const {n}))
                 (i32.store16 (i32.const {}) (i32.const 0x7d7b))
                 {}",
                HUGE_AT + n,
                ret_ok(
                    &format!("(i32.const {HUGE_AT})"),
                    &format!("(i32.const {})", n + 2)
                )
            )
        }
        Behaviour::OutOfBounds => ret_ok("(i32.const -65536)", "(i32.const 1000)"),
        // Both answers hold the error's string at offset 8 of the return
        // area: after the 8-aligned fs-stats' discriminant, and after the
        // discriminants of the result and of `runtime-error`.
        Behaviour::Statvfs(_) | Behaviour::ContainerRuntime => format!(
            "{call}
             (if (result i32) (i32.load8_u (i32.const {CALL_RET}))
               (then
                 (i32.store8 (i32.const {RET}) (i32.const 1))
                 (i32.store (i32.const {r4}) (i32.load (i32.const {e8})))
                 (i32.store (i32.const {r8}) (i32.load (i32.const {e12})))
                 (i32.const {RET}))
               (else {echo}))",
            call = match set {
                Behaviour::Statvfs(_) => format!(
                    "(call $statvfs (i32.const {PAYLOAD}) (i32.const {}) (i32.const {CALL_RET}))",
                    payload.len()
                ),
                _ => format!("(call $runtime (i32.const {CALL_RET}))"),
            },
            r4 = RET + 4,
            r8 = RET + 8,
            e8 = CALL_RET + 8,
            e12 = CALL_RET + 12,
        ),
        Behaviour::Flood { lines, events, .. } => {
            let len = payload.len();
            format!(
                "(local $n i32)
                 (local.set $n (i32.const {lines}))
                 (block $done (loop $l
                   (br_if $done (i32.eqz (local.get $n)))
                   (call $log (i32.const 2) (i32.const {PAYLOAD}) (i32.const {len}))
                   (local.set $n (i32.sub (local.get $n) (i32.const 1)))
                   (br $l)))
                 (local.set $n (i32.const {events}))
                 (block $done2 (loop $l2
                   (br_if $done2 (i32.eqz (local.get $n)))
                   (call $event (i32.const 1) (i32.const {REASON}) (i32.const 5) (i32.const {PAYLOAD}) (i32.const {len}))
                   (local.set $n (i32.sub (local.get $n) (i32.const 1)))
                   (br $l2)))
                 {echo}"
            )
        }
    };
    let meta_body = match metadata {
        Some(Behaviour::Spin) => "(loop $l (br $l)) unreachable".to_owned(),
        Some(Behaviour::Trap) => "unreachable".to_owned(),
        Some(Behaviour::Sleep) => sleep,
        Some(Behaviour::OutOfBounds) => format!("(i32.const {META_OOB})"),
        Some(other) => panic!("metadata cannot do {other:?}"),
        None => format!("(i32.const {META})"),
    };

    // Extra core instances: memory bombs and table bombs.
    let mut extra_modules = String::new();
    let mut extra_instances = String::new();
    let mut main_imports = String::new();
    let mut main_with = String::new();
    match set {
        Behaviour::ManyMemories { instances, mib } => {
            let pages = mib * 16;
            extra_modules.push_str(&format!(
                "(core module $big
                   (memory {pages})
                   (func $touch (local $p i32)
                     (loop $l
                       (i32.store8 (local.get $p) (i32.const 1))
                       (local.set $p (i32.add (local.get $p) (i32.const 4096)))
                       (br_if $l (i32.lt_u (local.get $p) (i32.const {})))))
                   (start $touch))\n",
                pages * 65536
            ));
            for i in 0..*instances {
                extra_instances.push_str(&format!("(core instance $big{i} (instantiate $big))\n"));
            }
        }
        Behaviour::GrowTables { instances } => {
            let tables: String = (0..8).map(|t| format!("(table $t{t} 0 funcref)")).collect();
            let grows: String = (0..8)
                .map(|t| format!("(drop (table.grow $t{t} (ref.null func) (i32.const 1000000)))"))
                .collect();
            extra_modules.push_str(&format!(
                "(core module $tabs {tables} (func (export \"grow\") {grows}))\n"
            ));
            for i in 0..*instances {
                extra_instances
                    .push_str(&format!("(core instance $tabs{i} (instantiate $tabs))\n"));
                main_imports.push_str(&format!("(import \"t{i}\" \"grow\" (func $grow{i}))\n"));
                main_with.push_str(&format!(
                    "(with \"t{i}\" (instance (export \"grow\" (func $tabs{i} \"grow\"))))\n"
                ));
            }
        }
        _ => {}
    }

    let mut imports = String::new();
    let mut lowered = String::new();
    let mut env_exports = String::new();
    if needs_wasi {
        imports.push_str(
            r#"(import "wasi:io/poll@0.2.0" (instance $poll
    (export "pollable" (type $p (sub resource)))
    (export "[method]pollable.block" (func (param "self" (borrow $p))))))
  (alias export $poll "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer $C $pollable (type $op))
    (export "pollable" (type $p (eq $op)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $p))))))
"#,
        );
        lowered.push_str(
            r#"(core func $block_c (canon lower (func $poll "[method]pollable.block")))
  (core func $subscribe_c (canon lower (func $clock "subscribe-duration")))
"#,
        );
        env_exports.push_str(
            r#"(export "block" (func $block_c)) (export "subscribe" (func $subscribe_c))"#,
        );
        main_imports.push_str(
            r#"(import "env" "block" (func $block (param i32)))
    (import "env" "subscribe" (func $subscribe (param i64) (result i32)))
"#,
        );
    }
    // The host's functions this component calls, declared in one import.
    let mut host_exports = String::new();
    if needs_host {
        host_exports.push_str(
            r#"(type $lvl' (enum "trace" "debug" "info" "warn" "error"))
    (export "level" (type $lvl (eq $lvl')))
    (type $et' (enum "normal" "warning"))
    (export "event-type" (type $et (eq $et')))
    (export "log" (func (param "level" $lvl) (param "message" string)))
    (export "record-event" (func (param "event-type" $et) (param "reason" string) (param "message" string)))
"#,
        );
        lowered.push_str(
            r#"(core func $log_c (canon lower (func $host "log") (memory (core memory $mem "memory"))))
  (core func $event_c (canon lower (func $host "record-event") (memory (core memory $mem "memory"))))
"#,
        );
        env_exports.push_str(r#" (export "log" (func $log_c)) (export "event" (func $event_c))"#);
        main_imports.push_str(
            r#"(import "env" "log" (func $log (param i32 i32 i32)))
    (import "env" "event" (func $event (param i32 i32 i32 i32 i32)))
"#,
        );
    }
    if needs_statvfs {
        host_exports.push_str(
            r#"(type $fs' (record (field "total-bytes" u64) (field "free-bytes" u64) (field "available-bytes" u64) (field "total-inodes" u64) (field "free-inodes" u64) (field "read-only" bool)))
    (export "fs-stats" (type $fs (eq $fs')))
    (export "statvfs" (func (param "path" string) (result (result $fs (error string)))))
"#,
        );
        lowered.push_str(
            r#"(core func $statvfs_c (canon lower (func $host "statvfs") (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
"#,
        );
        env_exports.push_str(r#" (export "statvfs" (func $statvfs_c))"#);
        main_imports.push_str(
            r#"(import "env" "statvfs" (func $statvfs (param i32 i32 i32)))
"#,
        );
    }
    if needs_runtime {
        host_exports.push_str(
            r#"(type $cond' (record (field "type" string) (field "status" bool) (field "reason" string) (field "message" string)))
    (export "runtime-condition" (type $cond (eq $cond')))
    (type $img' (record (field "id" string) (field "repo-tags" (list string)) (field "repo-digests" (list string)) (field "size" u64)))
    (export "runtime-image" (type $img (eq $img')))
    (type $rinfo' (record (field "name" string) (field "version" string) (field "api-version" string) (field "conditions" (list $cond)) (field "images" (list $img)) (field "handlers" (list string))))
    (export "container-runtime-info" (type $rinfo (eq $rinfo')))
    (type $rerr' (variant (case "not-granted" string) (case "not-configured" string) (case "unavailable" string)))
    (export "runtime-error" (type $rerr (eq $rerr')))
    (export "container-runtime" (func (result (result $rinfo (error $rerr)))))
"#,
        );
        lowered.push_str(
            r#"(core func $runtime_c (canon lower (func $host "container-runtime") (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
"#,
        );
        env_exports.push_str(r#" (export "runtime" (func $runtime_c))"#);
        main_imports.push_str(
            r#"(import "env" "runtime" (func $runtime (param i32)))
"#,
        );
    }
    if !host_exports.is_empty() {
        // `container-runtime` is new in 0.1.1; the rest import 0.1.0, as a
        // plugin built then does.
        let version = if needs_runtime { "0.1.1" } else { "0.1.0" };
        imports.push_str(&format!(
            "(import \"nodestatus:plugin/host@{version}\" (instance $host\n    {host_exports}))\n"
        ));
    }

    let info = r#"(record (field "name" string) (field "version" string) (field "description" string) (field "paths" (list string)) (field "env" (list string)) (field "affects-readiness" bool))"#;
    // 0.2's `set` returns `result<option<string>, string>`: `set2` moves an
    // `ok`'s string one slot on and writes the option's `some` before it.
    let (set_ty, set_fn, setter) = match part {
        false => (
            r#"(param "node" string) (result (result string (error string)))"#,
            "set",
            "nodestatus:plugin/setter@0.1.0",
        ),
        true => (
            r#"(param "node" string) (result (result (option string) (error string)))"#,
            "set2",
            "nodestatus:plugin/setter@0.2.0",
        ),
    };
    let some = u8::from(!matches!(set, Behaviour::Held));
    let set2 = format!(
        "(func (export \"set2\") (param i32 i32) (result i32)
      (drop (call $set (local.get 0) (local.get 1)))
      (if (i32.eqz (i32.load8_u (i32.const {RET})))
        (then
          (i32.store (i32.const {r12}) (i32.load (i32.const {r8})))
          (i32.store (i32.const {r8}) (i32.load (i32.const {r4})))
          (i32.store8 (i32.const {r4}) (i32.const {some}))))
      (i32.const {RET}))",
        r4 = RET + 4,
        r8 = RET + 8,
        r12 = RET + 12,
    );
    let wat = format!(
        r#"(component $C
  {imports}
  (core module $memmod
    (memory (export "memory") {pages})
    (global $heap (mut i32) (i32.const {heap}))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $r i32)
      (local.set $r (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
      (global.set $heap (i32.add (local.get $r) (local.get 3)))
      (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
        (then (drop (memory.grow (i32.add (i32.shr_u (local.get 3) (i32.const 16)) (i32.const 1))))))
      (local.get $r)))
  (core instance $mem (instantiate $memmod))
  {lowered}
  {extra_modules}
  {extra_instances}
  (core module $m
    (import "mem" "memory" (memory 1))
    {main_imports}
    (data (i32.const {name_off}) "{name}")
    (data (i32.const {ver_off}) "{ver}")
    (data (i32.const {META}) "{rec}")
    (data (i32.const {META_OOB}) "{rec_oob}")
    (data (i32.const {PATHS}) "{paths_list}")
    (data (i32.const {REASON}) "Flood")
    (data (i32.const {PAYLOAD}) "{payload}")
    (func $recurse (param i32) (result i32)
      (i32.add (call $recurse (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
    (func (export "metadata") (result i32) {meta_body})
    (func $set (export "set") (param i32 i32) (result i32) {body})
    {set2})
  (core instance $i (instantiate $m
    (with "mem" (instance $mem))
    {env_with}
    {main_with}))
  (type $info {info})
  (func $metadata (result $info) (canon lift (core func $i "metadata") (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
  (func $set {set_ty} (canon lift (core func $i "{set_fn}") (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
  (component $shim
    (type $info' {info})
    (import "import-type-plugin-info" (type $info (eq $info')))
    (import "import-func-metadata" (func $md (result $info)))
    (import "import-func-set" (func $s {set_ty}))
    (export $out "plugin-info" (type $info))
    (export "metadata" (func $md) (func (result $out)))
    (export "set" (func $s)))
  (instance $setter (instantiate $shim
    (with "import-type-plugin-info" (type $info))
    (with "import-func-metadata" (func $metadata))
    (with "import-func-set" (func $set))))
  (export "{setter}" (instance $setter)))"#,
        ver = escape(version),
        rec = escape(&rec),
        rec_oob = escape(&rec_oob),
        paths_list = escape(&paths_list),
        payload = escape(&payload),
        env_with = if env_exports.is_empty() {
            String::new()
        } else {
            format!("(with \"env\" (instance {env_exports}))")
        },
    );
    wat::parse_str(&wat).unwrap_or_else(|e| panic!("hostile WAT for {name}: {e}\n{wat}"))
}

/// A valid component that exports something other than the setter world.
pub fn wrong_world() -> Vec<u8> {
    wat::parse_str(
        r#"(component
  (core module $m (func (export "f")))
  (core instance $i (instantiate $m))
  (func $f (canon lift (core func $i "f")))
  (export "hello" (func $f)))"#,
    )
    .unwrap()
}

/// A component built against a future, incompatible WIT version: it exports
/// `nodestatus:plugin/setter@0.3.0` instead of `@0.1.x` or `@0.2.x`.
pub fn wrong_version(name: &str) -> Vec<u8> {
    replace_bytes(
        &component(name, &Behaviour::Echo),
        b"nodestatus:plugin/setter@0.1.0",
        b"nodestatus:plugin/setter@0.3.0",
    )
}

/// Replaces `from` by `to` (same length) in the binary: the export name is
/// stored as plain bytes, and the component stays valid.
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let at = out
        .windows(from.len())
        .position(|w| w == from)
        .expect("export name in the binary");
    out[at..at + to.len()].copy_from_slice(to);
    out
}

/// A core module (not a component).
pub fn core_module() -> Vec<u8> {
    wat::parse_str("(module (func (export \"set\")))").unwrap()
}

/// A valid component whose one core function is `instructions` additions
/// over `locals` locals that are all live at once: a few MB of WebAssembly
/// that takes Cranelift seconds and hundreds of MiB to compile (a compile
/// bomb). It never gets as far as being linked.
pub fn compile_bomb(instructions: usize, locals: usize) -> Vec<u8> {
    let mut body = String::with_capacity(instructions * 48);
    for l in 1..locals {
        body.push_str(&format!(
            "local.get 0 i32.const {l} i32.mul local.set {l}\n"
        ));
    }
    for i in 0..instructions {
        // Each sum feeds a later one, over locals that all stay live to the
        // end, so no pass can fold the function away and the register
        // allocator juggles every one of them.
        let (a, b) = (i % locals, (i * 7 + 3) % locals);
        body.push_str(&format!(
            "local.get {a} local.get {b} i32.add local.set {a}\n"
        ));
    }
    for l in 1..locals {
        body.push_str(&format!("local.get {l} i32.add\n"));
    }
    let wat = format!(
        "(component (core module (func (export \"f\") (param i32) (result i32) (local {})\nlocal.get 0\n{body})))",
        "i32 ".repeat(locals - 1)
    );
    wat::parse_str(&wat).expect("compile bomb WAT")
}

/// A component named `name` that implements the world (its `set` echoes)
/// and carries, beside it, an unused core module with [`compile_bomb`]'s
/// function: it passes every check made before a compile, and then takes
/// Cranelift as long as the bomb does. (A core module section may stand
/// anywhere in a component, and a module that is never instantiated is
/// still compiled.)
pub fn slow_to_compile(name: &str, instructions: usize, locals: usize) -> Vec<u8> {
    let mut out = component(name, &Behaviour::Echo);
    let bomb = compile_bomb(instructions, locals);
    // The bomb is a component with one core module section: take that
    // section (id 1) as it is.
    let section = &bomb[8..];
    assert_eq!(section[0], 1, "the bomb's first section is its core module");
    out.extend_from_slice(section);
    out
}
