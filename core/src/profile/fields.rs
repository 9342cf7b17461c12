//! The profile reference (`docs/reference/profile.md`) documents every
//! field the parser accepts, and only those: the accepted fields are read
//! from the parser's own types by walking their serde schema, the
//! documented ones from the reference's headings.

use super::RawProfile;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::cell::RefCell;
use std::collections::BTreeSet;

type Error = de::value::Error;

/// A deserializer that answers every request with a placeholder and
/// records the path of each struct field asked for; a map yields one
/// entry keyed `<name>` (the `dependencies` mapping).
struct Walker<'a> {
    path: String,
    seen: &'a RefCell<BTreeSet<String>>,
}

impl<'a> Walker<'a> {
    fn child(&self, key: &str) -> Walker<'a> {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        Walker {
            path,
            seen: self.seen,
        }
    }
}

impl<'de> Deserializer<'de> for Walker<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        // The one mapping read as "any" is `dependencies`; every other
        // "any" is a scalar or a value of its own (`memory_limit`).
        if self.path == "dependencies" {
            return self.deserialize_map(v);
        }
        v.visit_unit()
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_some(self)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_str("x")
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_str("x")
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_i64(1)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u64(1)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f64(1.0)
    }
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_bool(true)
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_map(Entries {
            keys: ["<name>"].iter(),
            at: self,
            record: false,
            current: String::new(),
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_map(Entries {
            keys: fields.iter(),
            at: self,
            record: true,
            current: String::new(),
        })
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u32 u128 f32 char bytes byte_buf unit unit_struct
        newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

struct Entries<'a> {
    keys: std::slice::Iter<'static, &'static str>,
    at: Walker<'a>,
    /// Struct fields are recorded; a map's placeholder key is not.
    record: bool,
    current: String,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(&key) = self.keys.next() else {
            return Ok(None);
        };
        self.current = key.to_string();
        seed.deserialize(key.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let child = self.at.child(&self.current);
        if self.record {
            self.at.seen.borrow_mut().insert(child.path.clone());
        }
        seed.deserialize(child)
    }
}

/// Every field path the parser accepts, `dependencies.<name>.trip.window`
/// style.
fn accepted() -> BTreeSet<String> {
    let seen = RefCell::new(BTreeSet::new());
    let walker = Walker {
        path: String::new(),
        seen: &seen,
    };
    if let Err(e) = RawProfile::deserialize(walker) {
        panic!("walking the profile's schema: {e}");
    }
    seen.into_inner()
}

/// The field paths the reference documents: a level-3 heading that is one
/// code span names a field, relative to the level-2 section it is in
/// ("Top level", or "Each dependency" for `dependencies.<name>.`).
fn documented(reference: &str) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    let mut prefix: Option<&str> = None;
    let mut fence = false;
    for line in reference.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        if let Some(section) = line.strip_prefix("## ") {
            prefix = match section.trim() {
                "Top level" => Some(""),
                "Each dependency" => Some("dependencies.<name>."),
                _ => None,
            };
        } else if let Some(heading) = line.strip_prefix("### ") {
            let heading = heading.trim();
            let Some(field) = heading
                .strip_prefix('`')
                .and_then(|h| h.strip_suffix('`'))
                .filter(|f| !f.contains('`'))
            else {
                continue;
            };
            let Some(prefix) = prefix else {
                return Err(format!(
                    "field heading `{field}` is outside the \"Top level\" and \"Each dependency\" sections"
                ));
            };
            out.insert(format!("{prefix}{field}"));
        }
    }
    Ok(out)
}

#[test]
fn the_profile_reference_documents_every_accepted_field_and_no_other() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/profile.md");
    let reference = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let documented = documented(&reference).unwrap_or_else(|e| panic!("{path}: {e}"));
    let accepted = accepted();
    let undocumented: Vec<_> = accepted.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/reference/profile.md and the parser disagree:\n  accepted but not documented: {undocumented:?}\n  documented but not accepted: {unknown:?}"
    );
}

#[test]
fn the_walk_finds_nested_fields() {
    let accepted = accepted();
    for path in [
        "memory_limit",
        "dependencies",
        "dependencies.<name>.trip.slow_call",
        "dependencies.<name>.half_open.probe_budget",
    ] {
        assert!(accepted.contains(path), "{path} not in {accepted:?}");
    }
}
