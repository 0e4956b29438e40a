//! Small hand-written WAT components that implement the `plugin` world (or
//! pretend to) and misbehave in `set`, so that hostile-plugin tests need no
//! guest toolchain.

/// How the component's `set` misbehaves.
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
}

const META: u32 = 2048;
const RET: u32 = 3072;
const STR: u32 = 256;

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A component named `name` whose `set` does `behaviour`.
pub fn component(name: &str, behaviour: &Behaviour) -> Vec<u8> {
    let version = b"0.0.1";
    let (name_off, ver_off) = (STR, STR + name.len() as u32);
    let payload: &[u8] = match behaviour {
        Behaviour::Return(s) | Behaviour::Fail(s) => s.as_bytes(),
        _ => b"",
    };
    let payload_off = 4096;
    // The input is copied above the payload; memory fits both.
    let heap = (payload_off + payload.len() as u32 + 7).max(16384) & !7;
    let pages = (heap / 65536 + 2).max(2);
    // plugin-info: name, version, description, paths, env (ptr, len each), bool.
    let mut rec = Vec::new();
    for (ptr, len) in [
        (name_off, name.len() as u32),
        (ver_off, version.len() as u32),
        (0, 0),
        (0, 0),
        (0, 0),
    ] {
        rec.extend(ptr.to_le_bytes());
        rec.extend(len.to_le_bytes());
    }
    rec.extend([0, 0, 0, 0]);
    let body = match behaviour {
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
        Behaviour::Return(_) | Behaviour::Fail(_) => {
            let disc = u32::from(matches!(behaviour, Behaviour::Fail(_)));
            format!(
                "(i32.store8 (i32.const {RET}) (i32.const {disc}))
                 (i32.store (i32.const {}) (i32.const {payload_off}))
                 (i32.store (i32.const {}) (i32.const {}))
                 (i32.const {RET})",
                RET + 4,
                RET + 8,
                payload.len()
            )
        }
    };
    let info = r#"(record (field "name" string) (field "version" string) (field "description" string) (field "paths" (list string)) (field "env" (list string)) (field "affects-readiness" bool))"#;
    let set_ty = r#"(param "node" string) (result (result string (error string)))"#;
    let wat = format!(
        r#"(component
  (core module $m
    (memory (export "memory") {pages})
    (global $heap (mut i32) (i32.const {heap}))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $r i32)
      (local.set $r (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
      (global.set $heap (i32.add (local.get $r) (local.get 3)))
      (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
        (then (drop (memory.grow (i32.add (i32.shr_u (local.get 3) (i32.const 16)) (i32.const 1))))))
      (local.get $r))
    (data (i32.const {name_off}) "{name}")
    (data (i32.const {ver_off}) "{ver}")
    (data (i32.const {META}) "{rec}")
    (data (i32.const {payload_off}) "{payload}")
    (func (export "metadata") (result i32) (i32.const {META}))
    (func (export "set") (param i32 i32) (result i32) {body}))
  (core instance $i (instantiate $m))
  (type $info {info})
  (func $metadata (result $info) (canon lift (core func $i "metadata") (memory (core memory $i "memory")) (realloc (core func $i "realloc"))))
  (func $set {set_ty} (canon lift (core func $i "set") (memory (core memory $i "memory")) (realloc (core func $i "realloc"))))
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
  (export "nodestatus:plugin/setter@0.1.0" (instance $setter)))"#,
        ver = escape(version),
        rec = escape(&rec),
        payload = escape(payload),
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

/// A core module (not a component).
pub fn core_module() -> Vec<u8> {
    wat::parse_str("(module (func (export \"set\")))").unwrap()
}
