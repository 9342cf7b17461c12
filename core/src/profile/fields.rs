//! The profile reference (`docs/reference/profile.md`) documents every
//! field the parser accepts, and only those: the accepted fields are read
//! from the parser's table of levels, the documented ones from the
//! reference's headings.

use super::Level;
use std::collections::BTreeSet;

/// Every field path the parser accepts, `dependencies.<name>.trip.window`
/// style: the parser's own table of levels, which it rejects every other
/// field by.
fn accepted() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for level in Level::ALL {
        let path = match level {
            Level::Top => String::new(),
            Level::Metrics => "metrics.".to_string(),
            _ => format!("dependencies.<name>.{}", level.prefix()),
        };
        for field in level.fields() {
            out.insert(format!("{path}{field}"));
        }
    }
    out
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
