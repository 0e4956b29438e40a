//! The fuzz target of a plugin's output (see `nodestatus_fuzz`): the
//! string a setter returns, read as the engine reads it (JSON, then a 0.1
//! setter's whole node or a 0.2 setter's part) and checked by every rule
//! of this crate that reads it. Its seeds are the SDK conformance suite's
//! node and parts (`sdk/conformance/part.json`).

use std::error::Error;
use std::path::Path;

use serde_json::Value;

use crate::node::{Diff, Part, part, patch};
use crate::ownership::Ownership;
use crate::{policy, validate};

/// The node a setter's output is read against: the conformance suite's.
fn base() -> Value {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-corpus/plugin-output/node.json");
    serde_json::from_slice(&std::fs::read(corpus).unwrap()).unwrap()
}

/// One output: `Ok` when it is a node or a part the engine takes further.
fn output(base: &Value, bytes: &[u8]) -> Result<(), Box<dyn Error>> {
    // A WIT string: UTF-8.
    let text = std::str::from_utf8(bytes)?;
    let value: Value = serde_json::from_str(text)?;
    // As a 0.1 setter's node.
    let as_node = policy::validate(&value).map(|()| {
        let problems = validate::problems(&value);
        let _ = validate::describe(&problems);
        let _ = validate::introduced(&validate::problems(base), problems);
        let _ = validate::update(base, &value);
        let _ = Diff::new(base, &value).paths();
        let _ = patch::two_way(base, &value);
        let _ = Ownership::from_node(&value);
    });
    // As a 0.2 setter's part, merged into the node.
    let as_part = Part::parse(value, base).map(|p| {
        let mut merged = base.clone();
        for f in p.fields() {
            let _ = f.standing(base);
            if let Some(v) = &f.value {
                part::set(&mut merged, &f.path, v.clone());
            }
        }
        let _ = validate::problems(&merged);
    });
    match (as_node, as_part) {
        (Err(e), Err(_)) => Err(e.into()),
        _ => Ok(()),
    }
}

#[test]
fn fuzz_plugin_output() {
    let base = base();
    nodestatus_fuzz::run(
        "plugin-output",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-corpus/plugin-output"),
        |bytes| output(&base, bytes),
    );
}
