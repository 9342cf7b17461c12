//! The profile read into a tree that remembers where each value was
//! written, so that every problem can be reported with its line and
//! column, and every problem found (a typed deserializer stops at the
//! first). Text is read by `saphyr-parser`'s event stream in one pass;
//! data (a [`serde_yaml_ng::Value`] built in code or from a Python dict)
//! becomes the same tree without positions, so both meet the same checks.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use std::fmt;

/// Where a value starts in the profile's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At {
    line: usize,
    column: usize,
}

impl At {
    fn of(span: &Span) -> At {
        // saphyr's columns count from 0, its lines from 1.
        At {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// The suffix a problem carries: ` at line N column M`, or nothing for a
/// value given as data.
pub(crate) struct Position(pub(crate) Option<At>);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(At { line, column }) => write!(f, " at line {line} column {column}"),
            None => Ok(()),
        }
    }
}

/// One value of the profile and where it was written.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) at: Option<At>,
}

/// A value: a scalar keeps the text it was written as beside what YAML's
/// core schema reads it as (`10` is a number, `"10"` a string).
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Scalar(String, Kind),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

/// What a scalar is under YAML 1.2's core schema.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str,
}

impl Node {
    /// A mapping's entries, or `None` for any other value.
    pub(crate) fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// Whether this is YAML's null (`~`, `null` or nothing written).
    pub(crate) fn is_null(&self) -> bool {
        matches!(self.value, Value::Scalar(_, Kind::Null))
    }

    /// A key's text (a mapping or list as a key shows as such).
    pub(crate) fn key_text(&self) -> String {
        match &self.value {
            Value::Scalar(text, _) => text.clone(),
            other => Shown(other).to_string(),
        }
    }
}

/// A value as a message quotes it: a scalar as written, in backticks; a
/// list or mapping by its shape.
pub(crate) struct Shown<'a>(pub(crate) &'a Value);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Scalar(_, Kind::Null) => f.write_str("nothing"),
            Value::Scalar(text, _) => write!(f, "`{}`", Clipped(text)),
            Value::Seq(_) => f.write_str("a list"),
            Value::Map(_) => f.write_str("a mapping"),
        }
    }
}

/// Text shortened for a message: a 1 MB scalar is not repeated whole.
struct Clipped<'a>(&'a str);

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 80;
        match self.0.char_indices().nth(MAX) {
            None => f.write_str(self.0),
            Some((end, _)) => write!(f, "{}…", &self.0[..end]),
        }
    }
}

/// Most values a profile may expand to: a 16 MiB profile has fewer than
/// 2 M; aliases that repeat one mapping over and over (a "billion laughs"
/// text) would otherwise take memory exponential in the text's size.
const MAX_NODES: usize = 4 << 20;

/// A collection being read.
enum Frame {
    Seq {
        items: Vec<Node>,
        at: At,
        anchor: usize,
    },
    Map {
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
        at: At,
        anchor: usize,
    },
}

/// Reads the profile's text: its one document as a tree, or the problem
/// (malformed YAML, several documents, aliases past [`MAX_NODES`]) with
/// the dependency it was found in, if any, and its position.
pub(crate) fn parse(text: &str) -> Result<Node, String> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: Vec<Option<Node>> = Vec::new();
    let mut root: Option<Node> = None;
    let mut nodes = 0usize;
    let mut documents = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(e) => e,
            Err(e) => {
                let at = At {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                };
                return Err(format!(
                    "{}the profile is not well-formed YAML: {}{}",
                    context(&stack),
                    e.info(),
                    Position(Some(at))
                ));
            }
        };
        let at = At::of(&span);
        let done = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => None,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(format!(
                        "the profile holds more than one YAML document (`---`){}: write one",
                        Position(Some(at))
                    ));
                }
                None
            }
            Event::Scalar(text, style, anchor, tag) => {
                let kind = match (style, tag) {
                    (ScalarStyle::Plain, None) => resolve(&text),
                    (ScalarStyle::Plain, Some(tag)) if tag.suffix != "str" => resolve(&text),
                    _ => Kind::Str,
                };
                Some((
                    Node {
                        value: Value::Scalar(text.into_owned(), kind),
                        at: Some(at),
                    },
                    anchor,
                ))
            }
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq {
                    items: Vec::new(),
                    at,
                    anchor,
                });
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map {
                    entries: Vec::new(),
                    key: None,
                    at,
                    anchor,
                });
                None
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq { items, at, anchor }) => Some((
                    Node {
                        value: Value::Seq(items),
                        at: Some(at),
                    },
                    anchor,
                )),
                Some(Frame::Map {
                    entries,
                    at,
                    anchor,
                    ..
                }) => Some((
                    Node {
                        value: Value::Map(entries),
                        at: Some(at),
                    },
                    anchor,
                )),
                None => None,
            },
            Event::Alias(id) => match anchors.get(id).and_then(Option::as_ref) {
                Some(node) => {
                    nodes += size(node);
                    let mut copy = node.clone();
                    copy.at = Some(at);
                    Some((copy, 0))
                }
                None => {
                    return Err(format!(
                        "{}an alias names no anchor{}",
                        context(&stack),
                        Position(Some(at))
                    ))
                }
            },
        };
        let Some((node, anchor)) = done else {
            continue;
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(format!(
                "the profile expands to more than {MAX_NODES} values (aliases repeating a value?){}",
                Position(Some(at))
            ));
        }
        if anchor > 0 {
            if anchors.len() <= anchor {
                anchors.resize(anchor + 1, None);
            }
            anchors[anchor] = Some(node.clone());
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    Ok(root.unwrap_or(Node {
        value: Value::Scalar(String::new(), Kind::Null),
        at: None,
    }))
}

/// How many values `node` holds, itself included.
fn size(node: &Node) -> usize {
    match &node.value {
        Value::Scalar(..) => 1,
        Value::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| size(k) + size(v))
                .sum::<usize>()
        }
    }
}

/// "dependency `x`: " when the stack is inside one, for a parse error.
fn context(stack: &[Frame]) -> String {
    let key = |f: &Frame| match f {
        Frame::Map { key: Some(k), .. } => Some(k.key_text()),
        _ => None,
    };
    match stack {
        [top, deps, ..] if key(top).as_deref() == Some("dependencies") => match key(deps) {
            Some(name) => format!("dependency `{name}`: "),
            None => String::new(),
        },
        _ => String::new(),
    }
}

/// A plain scalar under YAML 1.2's core schema.
fn resolve(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Kind::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Kind::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Kind::Float(f64::NAN),
        _ => {}
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let radix = |prefix: &str, radix| {
        text.strip_prefix(prefix)
            .filter(|d| !d.is_empty())
            .and_then(|d| i64::from_str_radix(d, radix).ok())
    };
    if let Some(n) = radix("0x", 16).or_else(|| radix("0o", 8)) {
        return Kind::Int(n);
    }
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(n) => Kind::Int(n),
            // Too large for a whole number the profile could use: still a
            // number, so its field's range check names it.
            Err(_) => text.parse().map(Kind::Float).unwrap_or(Kind::Str),
        };
    }
    if is_float(unsigned) {
        if let Ok(x) = text.parse() {
            return Kind::Float(x);
        }
    }
    Kind::Str
}

/// `[0-9]*(\.[0-9]*)?([eE][-+]?[0-9]+)?` with at least one digit before
/// the exponent: the core schema's float, less its sign.
fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// A value given as data: the same tree, without positions.
pub(crate) fn from_value(value: &serde_yaml_ng::Value) -> Node {
    use serde_yaml_ng::Value as V;
    let scalar = |text: String, kind| Value::Scalar(text, kind);
    let value = match value {
        V::Null => scalar(String::new(), Kind::Null),
        V::Bool(b) => scalar(b.to_string(), Kind::Bool(*b)),
        V::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => scalar(i.to_string(), Kind::Int(i)),
            (None, Some(x)) => scalar(n.to_string(), Kind::Float(x)),
            (None, None) => scalar(n.to_string(), Kind::Str),
        },
        V::String(s) => scalar(s.clone(), Kind::Str),
        V::Sequence(items) => Value::Seq(items.iter().map(from_value).collect()),
        V::Mapping(m) => Value::Map(
            m.iter()
                .map(|(k, v)| (from_value(k), from_value(v)))
                .collect(),
        ),
        V::Tagged(t) => return from_value(&t.value),
    };
    Node { value, at: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Kind {
        match parse(text).unwrap().value {
            Value::Scalar(_, kind) => kind,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        assert_eq!(kind("10"), Kind::Int(10));
        assert_eq!(kind("-3"), Kind::Int(-3));
        assert_eq!(kind("0x10"), Kind::Int(16));
        assert_eq!(kind("0.5"), Kind::Float(0.5));
        assert_eq!(kind("1e3"), Kind::Float(1000.0));
        assert_eq!(kind("\"10\""), Kind::Str);
        assert_eq!(kind("'10'"), Kind::Str);
        assert_eq!(kind("!!str 10"), Kind::Str);
        assert_eq!(kind("~"), Kind::Null);
        assert_eq!(kind("true"), Kind::Bool(true));
        assert_eq!(kind("30s"), Kind::Str);
        assert_eq!(kind("1.2.3"), Kind::Str);
        assert_eq!(kind("."), Kind::Str);
        assert_eq!(kind("yes"), Kind::Str);
    }

    #[test]
    fn positions_count_lines_and_columns_from_one() {
        let root = parse("a:\n  b: 1\n").unwrap();
        let (_, inner) = &root.entries().unwrap()[0];
        let (key, value) = &inner.entries().unwrap()[0];
        assert_eq!(key.at, Some(At { line: 2, column: 3 }));
        assert_eq!(value.at, Some(At { line: 2, column: 6 }));
    }

    #[test]
    fn aliases_copy_their_anchor_within_a_bound() {
        let root = parse("a: &x {b: 1}\nc: *x\n").unwrap();
        let entries = root.entries().unwrap();
        assert_eq!(entries[1].1.entries().unwrap()[0].0.key_text(), "b");
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let prev = format!("*a{}", i - 1);
            bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
        }
        let err = parse(&bomb).unwrap_err();
        assert!(err.contains("expands to more than"), "{err}");
    }
}
