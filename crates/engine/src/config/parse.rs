//! Reading the file: size and type checks, the YAML walk that refuses
//! duplicate keys and alias bombs, and the messages ("did you mean").

use std::path::Path;

use super::{ConfigFile, Error, MAX_CONFIG_BYTES, Result, top_keys};

/// Levenshtein distance, for "did you mean".
pub(super) fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .min()
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .map(|(_, c)| c)
}

/// Says what to do after serde's and the YAML parser's messages: the
/// closest valid name for an unknown field, the expected shape in words.
fn explain(message: String) -> String {
    let message = suggest(message);
    const ADVICE: &[(&str, &str)] = &[
        (
            "as u128, expected i64",
            "is too large: expected an integer (for example 40)",
        ),
        (
            "found character that cannot start any token",
            "found a character that cannot start any YAML token (a tab? YAML indents with spaces)",
        ),
        ("expected i64", "expected an integer (for example 40)"),
        ("expected i32", "expected an integer (for example 10)"),
        ("expected a boolean", "expected true or false"),
        (
            "expected struct ConfigFile",
            "expected a mapping of config fields (nodeName: ..., plugins: ...)",
        ),
        (
            "expected struct PluginFile",
            "expected a mapping of plugin settings (paths, env, config, timeout, ...), or {} for the defaults",
        ),
        (
            "expected struct FieldsFile",
            "expected {allow: [...], deny: [...]}",
        ),
        (
            "expected struct Taint",
            "expected {key: ..., value: ..., effect: NoSchedule}",
        ),
        ("expected a map", "expected a mapping (key: value)"),
        ("expected a sequence", "expected a list ([a, b])"),
        (
            "recursion limit exceeded",
            "nested more than 128 levels deep: a config is a few levels deep, flatten it",
        ),
        (
            "repetition limit exceeded",
            "YAML aliases repeat too much (a \"billion laughs\" file?): write the values out without aliases",
        ),
        (
            "more than one document is not supported",
            "more than one document is not supported: put every field in one document (remove the `---` separators)",
        ),
    ];
    match ADVICE.iter().find(|(from, _)| message.contains(from)) {
        Some((from, to)) => message.replacen(from, to, 1),
        None => message,
    }
}

/// Adds "did you mean" to serde's unknown-field messages.
fn suggest(message: String) -> String {
    let Some(rest) = message
        .strip_prefix("unknown field `")
        .or_else(|| message.split("unknown field `").nth(1))
    else {
        return message;
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return message;
    };
    let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
    let list = if expected.is_empty() {
        top_keys()
    } else {
        expected
    };
    // The suggestion goes right after the field, before the long list.
    match closest(field, &list) {
        Some(c) => message.replacen(
            &format!("unknown field `{field}`"),
            &format!("unknown field `{field}` (did you mean `{c}`?)"),
            1,
        ),
        None => message,
    }
}

/// The most values (scalars, lists and mappings, with aliases expanded) that
/// a config file may hold. It bounds what YAML aliases can expand to (a
/// "billion laughs" file); a real config holds a few hundred.
pub const MAX_YAML_VALUES: usize = 100_000;

/// Reads the config file: a regular file of at most `MAX_CONFIG_BYTES`,
/// never hanging on a FIFO ([`nodestatus_runtime::files::read_regular`]).
fn read_capped(path: &Path) -> Result<Vec<u8>> {
    use nodestatus_runtime::files::Error as F;
    nodestatus_runtime::files::read_regular(path, MAX_CONFIG_BYTES).map_err(|e| match e {
        F::Io(source) => Error::Read {
            path: path.to_owned(),
            source,
        },
        F::NotRegular { kind } => Error::NotRegular {
            path: path.to_owned(),
            kind,
        },
        F::TooLarge { size, limit } => Error::TooLarge {
            path: path.to_owned(),
            size,
            limit,
        },
    })
}

/// The line and column (from 1, column in bytes) of byte `offset`.
fn position(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = offset
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    (line, column)
}

/// A walk over any YAML value that counts the values (aliases expanded),
/// and refuses duplicate keys in a mapping.
#[derive(Clone, Copy)]
struct Walk<'a> {
    budget: &'a std::cell::Cell<usize>,
}

impl Walk<'_> {
    fn spend<E: serde::de::Error>(self) -> Result<(), E> {
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the file expands to more than {MAX_YAML_VALUES} values (YAML aliases, a \"billion laughs\" file?): write the values out, without aliases that repeat large parts"
            ))),
        }
    }
}

/// A mapping key as text, when it is a scalar (other keys are walked, with
/// the same budget, and not compared).
struct Key<'a>(Walk<'a>);

impl<'de> serde::de::DeserializeSeed<'de> for Key<'_> {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Key<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some("null".into()))
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some("null".into()))
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_seq(self.0, seq).map(|()| None)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_map(self.0, map).map(|()| None)
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_enum(self.0, data).map(|()| None)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.spend()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.spend()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.spend()
    }
    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<(), E> {
        self.spend()
    }
    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<(), E> {
        self.spend()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.spend()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.spend()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.spend()
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.spend()
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.spend()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.spend()?;
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key_seed(Key(self))? {
            self.spend()?;
            if let Some(k) = key
                && !seen.insert(k.clone())
            {
                return Err(serde::de::Error::custom(format_args!(
                    "the key {k:?} appears twice in one mapping: keep one (YAML would silently use the last)"
                )));
            }
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged value (`!tag value`).
        use serde::de::VariantAccess;
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

impl ConfigFile {
    /// Reads and parses a YAML file: a regular file (a FIFO or a device is
    /// refused before it is read, so it cannot block the start), at most
    /// [`MAX_CONFIG_BYTES`], in UTF-8.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = read_capped(path)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            let (line, column) = position(&bytes, e.valid_up_to());
            Error::NotUtf8 {
                path: path.to_owned(),
                line,
                column,
            }
        })?;
        Self::parse(text, path)
    }

    /// Parses YAML text; `path` is for messages.
    ///
    /// The text is walked once as plain YAML first, which refuses duplicate
    /// keys (serde would keep the last one silently) and aliases that expand
    /// to more than [`MAX_YAML_VALUES`] values, before it is read as this
    /// schema.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let parse_error = |e: serde_yaml::Error| Error::Parse {
            path: path.to_owned(),
            message: explain(e.to_string()),
        };
        let budget = std::cell::Cell::new(MAX_YAML_VALUES);
        serde::de::DeserializeSeed::deserialize(
            Walk { budget: &budget },
            serde_yaml::Deserializer::from_str(text),
        )
        .map_err(parse_error)?;
        serde_yaml::from_str(text).map_err(parse_error)
    }
}
