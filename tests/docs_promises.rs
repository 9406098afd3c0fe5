//! The promises of docs/user/snapshots-and-restores.md held to their tests: every sentence of its
//! Snapshot, Schedule, Restore and On the Machine sections that says what is kept, deleted,
//! pruned, never done or left untouched is pinned here to the tests that show it (the tests must
//! exist), and every test its "Where this is tested" table names exists. Changing a promise, or
//! removing its test, fails here until the pin follows.

use std::path::{Path, PathBuf};

mod docs_promises {
    pub mod pins;
}
use docs_promises::pins as promises;

const PAGE: &str = "docs/user/snapshots-and-restores.md";
/// The sections whose promises must all be pinned.
const SECTIONS: &[&str] = &[
    "## Snapshot",
    "## Schedule",
    "## Restore",
    "## A remote Machine's snapshots and restores",
    "## On the Machine",
];
/// A sentence with one of these words says what is kept, deleted or never done.
const PROMISE_WORDS: &[&str] = &[
    "never",
    "nothing",
    "pruned",
    "untouched",
    "deleted",
    "kept",
    "keeps",
    "at most",
    "only",
    "deletes",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whitespace collapsed to single spaces.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The prose of `section` (up to the next heading of its level or higher), outside fenced
/// blocks and tables, split into sentences and list items (at `. `, `; ` and bullets).
fn sentences(page: &str, section: &str) -> Vec<String> {
    let level = section.chars().take_while(|c| *c == '#').count();
    let mut out = Vec::new();
    let (mut inside, mut fenced) = (false, false);
    let mut text = String::new();
    for line in page.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !fenced && hashes > 0 && line[hashes..].starts_with(' ') {
            if line.trim() == section {
                inside = true;
                continue;
            }
            if inside && hashes <= level {
                break;
            }
            // A deeper heading is the section's too, with its prose (its own pins).
            text.push('\n');
            continue;
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !inside || fenced || line.trim_start().starts_with('|') {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with("- ") {
            text.push('\n');
        }
        text.push(' ');
        text.push_str(line.strip_prefix("- ").unwrap_or(line));
    }
    for piece in text.split('\n') {
        let piece = flat(piece);
        let mut rest = piece.as_str();
        while !rest.is_empty() {
            let end = [". ", "; ", ": - "]
                .iter()
                .filter_map(|sep| rest.find(sep).map(|i| i + sep.len()))
                .min()
                .unwrap_or(rest.len());
            let s = rest[..end].trim();
            if !s.is_empty() {
                out.push(s.to_owned());
            }
            rest = &rest[end..];
        }
    }
    out
}

/// `path::name`: `path` exists and defines `fn name` (a name ending in `…` is a prefix).
fn check_test(reference: &str) -> Result<(), String> {
    let (path, name) = reference
        .rsplit_once("::")
        .ok_or_else(|| format!("{reference}: not path::name"))?;
    let text = std::fs::read_to_string(root().join(path))
        .map_err(|e| format!("{reference}: {path}: {e}"))?;
    defines(&text, name)
        .then_some(())
        .ok_or_else(|| format!("{reference}: {path} defines no fn {name}"))
}

fn defines(text: &str, name: &str) -> bool {
    match name.strip_suffix('…') {
        Some(prefix) => text.contains(&format!("fn {prefix}")),
        None => text.contains(&format!("fn {name}(")) || text.contains(&format!("fn {name}<")),
    }
}

#[test]
fn every_promise_of_the_snapshots_guide_is_pinned_to_tests_that_exist() {
    let page = std::fs::read_to_string(root().join(PAGE)).expect(PAGE);
    let whole = flat(&page);
    let mut errors = Vec::new();
    for (fragment, tests) in promises::PINS {
        if !whole.contains(&flat(fragment)) {
            errors.push(format!("{PAGE} no longer says: {fragment:?}"));
        }
        if tests.is_empty() {
            errors.push(format!("{fragment:?} is pinned to no test"));
        }
        errors.extend(tests.iter().filter_map(|t| check_test(t).err()));
    }
    let pinned: Vec<String> = promises::PINS.iter().map(|(f, _)| flat(f)).collect();
    for section in SECTIONS {
        let found = sentences(&page, section);
        assert!(!found.is_empty(), "{PAGE} has no section {section:?}");
        for s in found {
            let lower = s.to_lowercase();
            let promise = PROMISE_WORDS.iter().any(|w| lower.contains(w));
            let covered = pinned
                .iter()
                .any(|p| p.contains(s.trim_end_matches([';', '.', ':', ' '])) || s.contains(p));
            if promise && !covered {
                errors.push(format!("{section}: a promise pinned to no test: {s:?}"));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A file named in the table: its path from the root, or the files under `src/` and `tests/`
/// whose path ends with it (the table shortens `src/snapshots/schedule/tests.rs` to
/// `schedule/tests.rs`).
fn resolve(name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("readable").flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    if let Some(prefix) = name.strip_suffix('*') {
        let dir = root().join(Path::new(prefix).parent().unwrap_or(Path::new("")));
        let mut all = Vec::new();
        walk(&dir, &mut all);
        return (all.into_iter())
            .filter(|p| p.starts_with(root().join(prefix).parent().unwrap_or(&dir)))
            .filter(|p| p.to_string_lossy().contains(prefix))
            .collect();
    }
    let direct = root().join(name);
    if direct.is_file() {
        return vec![direct];
    }
    let mut all = Vec::new();
    walk(&root().join("src"), &mut all);
    walk(&root().join("tests"), &mut all);
    all.into_iter()
        .filter(|p| p.to_string_lossy().ends_with(&format!("/{name}")))
        .collect()
}

#[test]
fn every_test_the_snapshots_guides_table_names_exists() {
    let page = std::fs::read_to_string(root().join(PAGE)).expect(PAGE);
    let table = page
        .split("\n## Where this is tested\n")
        .nth(1)
        .expect("the guide's \"Where this is tested\" section");
    let rows: Vec<&str> = (table.lines())
        .filter(|l| l.starts_with('|') && !l.starts_with("|--") && !l.starts_with("| Promise"))
        .collect();
    assert!(rows.len() > 20, "the table's rows: {rows:?}");
    let mut errors = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.split('|').collect();
        let tests = cells.get(2).copied().unwrap_or_default();
        let names: Vec<&str> = tests.split('`').skip(1).step_by(2).collect();
        let (files, items): (Vec<&str>, Vec<&str>) =
            (names.iter()).partition(|n| n.ends_with(".rs") || n.contains('/'));
        let mut texts = Vec::new();
        for f in &files {
            let found = resolve(f);
            if found.is_empty() {
                errors.push(format!("{row}\n  names {f}, which does not exist"));
            }
            texts.extend(found.iter().filter_map(|p| std::fs::read_to_string(p).ok()));
        }
        if files.is_empty() {
            errors.push(format!("{row}\n  names no file"));
        }
        for item in items {
            // A test's name, or a name the test uses (`db-by-hand`).
            let function = item.contains('_')
                && (item.chars())
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_…".contains(c));
            let known = if function {
                texts.iter().any(|t| defines(t, item))
            } else {
                texts.iter().any(|t| t.contains(item))
            };
            if !known {
                errors.push(format!(
                    "{row}\n  names {item}, which its files do not hold"
                ));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
