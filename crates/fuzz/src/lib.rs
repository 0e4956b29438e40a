//! Fuzzing on stable Rust: one property test per parser of untrusted bytes.
//!
//! A crate's fuzz target is an ordinary `#[test]` that calls [`run`] with
//! the parser's entry point (the function the engine calls on downloaded
//! or plugin-written bytes) and the target's seed corpus,
//! `crates/<crate>/fuzz-corpus/<target>/`: real inputs, copied from the
//! fixtures that the real tools made. [`run`] feeds the parser
//!
//! - every seed as it is, and at least one must pass (so a target that no
//!   longer reaches its parser fails);
//! - arbitrary bytes (a fifth of the inputs);
//! - mutations of a seed's bytes (two fifths): bits flipped, bytes set to
//!   JSON and DER punctuation, runs inserted, deleted, repeated or spliced
//!   from another seed, the end cut off;
//! - edits of a JSON seed's values (two fifths), so that the input still
//!   parses as JSON and reaches the parser's own checks: a value replaced
//!   by one of another type or an odd one (huge numbers, long or empty
//!   strings, empty objects), a member or element removed or doubled; then
//!   0 to 2 byte mutations (a seed that is not JSON, DER or a signed note,
//!   gets byte mutations there too);
//!
//! and requires of each input, all bounded to [`MAX_INPUT_BYTES`], that the
//! parser returns (`Ok`, or its typed error with a message), never panics,
//! and answers within [`MAX_CASE_TIME`]. A failure is shrunk by proptest
//! and shown as base64, ready to become a regression test.
//!
//! `NODESTATUS_FUZZ_CASES` sets the number of generated inputs per target
//! (default [`DEFAULT_CASES`], so that every target together takes seconds
//! in a debug build and CI runs them with the other tests). Each target
//! prints one line on stderr: `fuzz <target>: <n> inputs (<seeds> seeds,
//! <ok> passed) in <t> s` (`cargo test -- --nocapture` shows it).

use std::fmt::Display;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::Value;

/// Generated inputs per target when `NODESTATUS_FUZZ_CASES` is unset.
pub const DEFAULT_CASES: u32 = 2000;
/// The largest input tried: every parser here reads a bounded body.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The longest one input may take (a debug build, on a loaded machine).
pub const MAX_CASE_TIME: Duration = Duration::from_secs(10);

/// Bytes that mean something to JSON, DER, base64 and the signed-note text.
const INTERESTING: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'0', b'9', b'-',
    b'e', b'n', b't', b'=', b'+', b'/', b'\n', b' ', 0x30, 0x04, 0x06, 0x81, 0x82, 0xa0, 0xa3,
];

/// What a target's run tried.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    /// Inputs tried: the seeds and the generated ones.
    pub inputs: u32,
    /// The seeds among them.
    pub seeds: u32,
    /// The inputs the parser passed.
    pub passed: u32,
    /// The whole run's time.
    pub elapsed: Duration,
}

/// The number of generated inputs per target: `NODESTATUS_FUZZ_CASES`,
/// else [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    std::env::var("NODESTATUS_FUZZ_CASES")
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("NODESTATUS_FUZZ_CASES={v:?} is not a number"))
        })
        .unwrap_or(DEFAULT_CASES)
}

/// The files of a seed corpus directory, sorted by name.
pub fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read the seed corpus {}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(
        !seeds.is_empty(),
        "the seed corpus {} is empty",
        dir.display()
    );
    seeds
}

/// One change to an input.
/// Positions are taken modulo the length of what they index.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Repeat(usize, usize, usize),
    Splice(usize, usize, usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![any::<u8>(), select(INTERESTING)];
    prop_oneof![
        3 => (any::<usize>(), 0..8u8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        3 => (any::<usize>(), byte.clone()).prop_map(|(at, b)| Mutation::Set(at, b)),
        2 => (any::<usize>(), vec(byte, 1..16)).prop_map(|(at, b)| Mutation::Insert(at, b)),
        2 => (any::<usize>(), 1..64usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        1 => (any::<usize>(), 1..32usize, 1..64usize).prop_map(|(at, n, k)| Mutation::Repeat(at, n, k)),
        1 => (any::<usize>(), any::<usize>(), any::<usize>(), 1..256usize)
            .prop_map(|(at, seed, from, n)| Mutation::Splice(at, seed, from, n)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// `input` with `m` applied (splices from `seeds`), cut to
/// [`MAX_INPUT_BYTES`].
fn apply(input: &mut Vec<u8>, m: &Mutation, seeds: &[Vec<u8>]) {
    let len = input.len();
    let at = |i: &usize| if len == 0 { 0 } else { i % len };
    match m {
        Mutation::Flip(i, bit) if len > 0 => input[at(i)] ^= 1u8 << bit,
        Mutation::Set(i, b) if len > 0 => input[at(i)] = *b,
        Mutation::Flip(..) | Mutation::Set(..) => {}
        Mutation::Insert(i, bytes) => {
            let at = at(i);
            input.splice(at..at, bytes.iter().copied());
        }
        Mutation::Delete(i, n) => {
            let at = at(i);
            input.drain(at..(at + n).min(len));
        }
        Mutation::Repeat(i, n, times) => {
            let at = at(i);
            let run = input[at..(at + n).min(len)].to_vec();
            let copies: Vec<u8> = run
                .iter()
                .copied()
                .cycle()
                .take(run.len() * times)
                .collect();
            input.splice(at..at, copies);
        }
        Mutation::Splice(i, seed, from, n) => {
            let other = &seeds[seed % seeds.len()];
            if !other.is_empty() {
                let start = from % other.len();
                let run = &other[start..(start + n).min(other.len())];
                let at = at(i);
                input.splice(at..at, run.iter().copied());
            }
        }
        Mutation::Truncate(i) => input.truncate(at(i)),
    }
    input.truncate(MAX_INPUT_BYTES);
}

/// One edit of a JSON value: of its `n`th value in pre-order (modulo
/// their number).
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, Value),
    /// Removes one member or element (the second index, modulo).
    Remove(usize, usize),
    /// Doubles one element, or nests the value in an array.
    Double(usize, usize),
}

/// Strings that mean something to the parsers here.
const STRINGS: &[&str] = &[
    "",
    "-1",
    "0",
    "sha256:",
    "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "AAAA",
    "%%%",
    "\u{2014} ",
    "\n\n",
    "2026-02-30T25:61:61Z",
    "9999999999999999999999",
    "Node",
    "True",
    "$patch",
];

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        select(&[-0.0f64, 0.5, -1.5, 1e308, 4.9e-324][..]).prop_map(Value::from),
        select(STRINGS).prop_map(Value::from),
        vec(any::<char>(), 0..24).prop_map(|c| Value::from(c.into_iter().collect::<String>())),
        (1..4096usize).prop_map(|n| Value::from("a".repeat(n))),
        Just(Value::Object(Default::default())),
        Just(Value::Array(Vec::new())),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), json_value()).prop_map(|(n, v)| Edit::Replace(n, v)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(n, k)| Edit::Remove(n, k)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(n, k)| Edit::Double(n, k)),
    ]
}

/// The number of values in `v`, itself included.
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// The `n`th value of `v` in pre-order.
fn nth(v: &mut Value, n: usize) -> Option<&mut Value> {
    fn walk<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
        if *n == 0 {
            return Some(v);
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().find_map(|x| walk(x, n)),
            Value::Object(o) => o.values_mut().find_map(|x| walk(x, n)),
            _ => None,
        }
    }
    walk(v, &mut { n })
}

/// `v` with `e` applied.
fn apply_edit(v: &mut Value, e: &Edit) {
    let (Edit::Replace(n, _) | Edit::Remove(n, _) | Edit::Double(n, _)) = e;
    let n = n % count(v);
    let Some(target) = nth(v, n) else { return };
    match (e, target) {
        (Edit::Replace(_, new), target) => *target = new.clone(),
        (Edit::Remove(_, k), Value::Array(a)) if !a.is_empty() => {
            a.remove(k % a.len());
        }
        (Edit::Remove(_, k), Value::Object(o)) if !o.is_empty() => {
            let key = o.keys().nth(k % o.len()).cloned().expect("a key");
            o.remove(&key);
        }
        (Edit::Double(_, k), Value::Array(a)) if !a.is_empty() => {
            let copy = a[k % a.len()].clone();
            a.push(copy);
        }
        (Edit::Double(..), target) => *target = Value::Array(vec![target.clone()]),
        _ => {}
    }
}

/// Arbitrary bytes, a seed with 1 to 8 byte mutations, or a JSON seed
/// with 1 to 3 edits and 0 to 2 byte mutations (another seed: 1 to 3 byte
/// mutations).
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    let json: Vec<Option<Value>> = seeds
        .iter()
        .map(|s| serde_json::from_slice(s).ok())
        .collect();
    let seeds = std::sync::Arc::new(seeds);
    let bytes_seeds = seeds.clone();
    let mutated = (0..n, vec(mutation(), 1..8)).prop_map(move |(i, ms)| {
        let mut input = bytes_seeds[i].clone();
        for m in &ms {
            apply(&mut input, m, &bytes_seeds);
        }
        input
    });
    let edited = (0..n, vec(edit(), 1..4), mutation(), vec(mutation(), 0..2)).prop_map(
        move |(i, es, first, ms)| {
            let mut input = match &json[i] {
                Some(v) => {
                    let mut v = v.clone();
                    for e in &es {
                        apply_edit(&mut v, e);
                    }
                    serde_json::to_vec(&v).expect("a Value serializes")
                }
                // Not JSON: one byte mutation at least.
                None => {
                    let mut input = seeds[i].clone();
                    apply(&mut input, &first, &seeds);
                    input
                }
            };
            for m in &ms {
                apply(&mut input, m, &seeds);
            }
            input.truncate(MAX_INPUT_BYTES);
            input
        },
    );
    prop_oneof![1 => vec(any::<u8>(), 0..4096), 2 => mutated, 2 => edited]
}

/// Calls `parse` on one input: `Ok(passed)`, or why the property fails.
fn one<E: Display>(parse: &impl Fn(&[u8]) -> Result<(), E>, bytes: &[u8]) -> Result<bool, String> {
    let started = Instant::now();
    let outcome = parse(bytes);
    let took = started.elapsed();
    if took > MAX_CASE_TIME {
        return Err(format!("an input of {} bytes took {took:?}", bytes.len()));
    }
    match outcome {
        Ok(()) => Ok(true),
        Err(e) if e.to_string().trim().is_empty() => {
            Err("the parser's error has an empty message".into())
        }
        Err(_) => Ok(false),
    }
}

/// Runs the target `name`: [`cases`] generated inputs and the seeds of
/// `corpus` through `parse`, with the properties of the module's docs.
/// Panics with the (shrunk) failing input, base64, when one fails.
pub fn run<E: Display>(
    name: &str,
    corpus_dir: &Path,
    parse: impl Fn(&[u8]) -> Result<(), E>,
) -> Report {
    let started = Instant::now();
    let seeds = corpus(corpus_dir);
    let mut passed = 0;
    for (i, seed) in seeds.iter().enumerate() {
        match one(&parse, seed) {
            Ok(ok) => passed += u32::from(ok),
            Err(why) => panic!("fuzz {name}: seed {i} of {}: {why}", corpus_dir.display()),
        }
    }
    assert!(
        passed > 0,
        "fuzz {name}: no seed of {} passes: the target no longer reaches its parser",
        corpus_dir.display()
    );
    let seed_count = seeds.len() as u32;
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    });
    let generated_passed = std::cell::Cell::new(0u32);
    let outcome = runner.run(&input(seeds), |bytes| {
        let ok = one(&parse, &bytes).map_err(TestCaseError::fail)?;
        generated_passed.set(generated_passed.get() + u32::from(ok));
        Ok(())
    });
    if let Err(e) = outcome {
        let shown = match &e {
            TestError::Fail(why, bytes) => format!("{why}; the input (base64): {}", base64(bytes)),
            TestError::Abort(why) => why.to_string(),
        };
        panic!("fuzz {name}: {shown}");
    }
    let report = Report {
        inputs: seed_count + cases,
        seeds: seed_count,
        passed: passed + generated_passed.get(),
        elapsed: started.elapsed(),
    };
    eprintln!(
        "fuzz {name}: {} inputs ({} seeds, {} passed) in {:.1} s",
        report.inputs,
        report.seeds,
        report.passed,
        report.elapsed.as_secs_f64()
    );
    report
}

/// Standard base64, for showing a failing input.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn mutations_stay_within_the_bound_and_apply_to_empty_inputs() {
        let seeds = vec![vec![b'x'; MAX_INPUT_BYTES], Vec::new()];
        let mut big = seeds[0].clone();
        apply(&mut big, &Mutation::Repeat(0, 31, 63), &seeds);
        assert_eq!(big.len(), MAX_INPUT_BYTES);
        let mut empty = Vec::new();
        for m in [
            Mutation::Flip(3, 1),
            Mutation::Set(3, 0),
            Mutation::Delete(3, 5),
            Mutation::Repeat(3, 5, 5),
            Mutation::Truncate(3),
        ] {
            apply(&mut empty, &m, &seeds);
            assert!(empty.is_empty(), "{m:?}");
        }
        apply(&mut empty, &Mutation::Insert(3, vec![1, 2]), &seeds);
        assert_eq!(empty, [1, 2]);
    }

    #[test]
    fn json_edits_replace_remove_and_double_values() {
        let seed = serde_json::json!({"a": [1, 2], "b": {"c": "d"}});
        // Pre-order: the object, [1, 2], 1, 2, {"c": "d"}, "d".
        assert_eq!(count(&seed), 6);
        let edited = |e: Edit| {
            let mut v = seed.clone();
            apply_edit(&mut v, &e);
            v
        };
        assert_eq!(
            edited(Edit::Replace(5, Value::Null)),
            serde_json::json!({"a": [1, 2], "b": {"c": null}})
        );
        assert_eq!(
            edited(Edit::Remove(1, 0)),
            serde_json::json!({"a": [2], "b": {"c": "d"}})
        );
        assert_eq!(edited(Edit::Remove(0, 1)), serde_json::json!({"a": [1, 2]}));
        assert_eq!(
            edited(Edit::Double(1, 1)),
            serde_json::json!({"a": [1, 2, 2], "b": {"c": "d"}})
        );
        assert_eq!(
            edited(Edit::Double(8, 0)),
            serde_json::json!({"a": [[1], 2], "b": {"c": "d"}})
        );
    }

    #[test]
    fn a_panicking_parser_fails_with_its_input_shrunk() {
        let dir = std::env::temp_dir().join(format!("nodestatus-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("seed"), b"fine").unwrap();
        let caught = std::panic::catch_unwind(|| {
            run("panics", &dir, |b: &[u8]| -> Result<(), String> {
                if b.contains(&b'!') {
                    panic!("a bang");
                }
                Ok(())
            })
        });
        std::fs::remove_dir_all(&dir).unwrap();
        let message = caught.unwrap_err();
        let message = message.downcast_ref::<String>().unwrap();
        // Shrunk to the one byte that fails: "IQ==" is "!".
        assert!(message.contains("the input (base64): IQ=="), "{message}");
    }
}
