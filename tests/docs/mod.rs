//! The manual as pages: README.md and docs/**/*.md split into headings, prose paragraphs and
//! fenced blocks, with GitHub's heading anchors and the links and inline code of the prose.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

pub const ILLUSTRATION: &str = "<!-- docs-check: illustration";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and docs/**/*.md.
pub fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("readable docs/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

/// A page split into prose (with the line each paragraph starts on) and fenced blocks.
pub struct Page {
    pub path: PathBuf,
    pub headings: Vec<String>,
    pub paragraphs: Vec<(usize, String)>,
    pub blocks: Vec<Block>,
}

pub struct Block {
    pub line: usize,
    pub info: String,
    pub illustration: bool,
    pub text: String,
}

pub fn parse(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).expect("readable page");
    let mut page = Page {
        path: path.to_owned(),
        headings: Vec::new(),
        paragraphs: Vec::new(),
        blocks: Vec::new(),
    };
    // The open fence: its marker, its indentation (stripped from its lines) and the block so far.
    let mut fence: Option<(String, usize, Block)> = None;
    let mut previous = "";
    let mut paragraph: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some((marker, fence_indent, block)) = fence.as_mut() {
            if trimmed.starts_with(marker.as_str())
                && trimmed.trim_matches(|c| c == '`' || c == '~').is_empty()
            {
                let (_, _, block) = fence.take().expect("open fence");
                page.blocks.push(block);
            } else {
                let strip = indent(line).min(*fence_indent);
                block.text.push_str(&line[strip..]);
                block.text.push('\n');
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            page.paragraphs.extend(paragraph.take());
            let marker: String = trimmed
                .chars()
                .take_while(|c| *c == '`' || *c == '~')
                .collect();
            let info = trimmed[marker.len()..].trim().to_owned();
            fence = Some((
                marker,
                indent(line),
                Block {
                    line: n,
                    info,
                    illustration: previous.trim_start().starts_with(ILLUSTRATION),
                    text: String::new(),
                },
            ));
        } else if trimmed.is_empty() {
            page.paragraphs.extend(paragraph.take());
        } else {
            if let Some(h) = heading(line) {
                page.headings.push(h);
            }
            match paragraph.as_mut() {
                Some((_, p)) => {
                    p.push('\n');
                    p.push_str(line);
                }
                None => paragraph = Some((n, line.to_owned())),
            }
        }
        previous = line;
    }
    page.paragraphs.extend(paragraph);
    assert!(
        fence.is_none(),
        "{}: a fenced block is never closed",
        path.display()
    );
    page
}

pub fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

pub fn heading(line: &str) -> Option<String> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    (1..=6)
        .contains(&hashes)
        .then(|| line[hashes..].strip_prefix(' '))
        .flatten()
        .map(|h| h.trim().to_owned())
}

/// GitHub's anchor for a heading: links reduced to their text, then lower case, every
/// character but letters, digits, `-`, `_` and spaces dropped, spaces turned into `-`.
pub fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

pub fn anchors(page: &Page) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    for h in &page.headings {
        let base = slug(h);
        let count = seen.entry(base.clone()).or_default();
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// Pieces of text, each with the line it starts on.
pub type Lines = Vec<(usize, String)>;

/// A paragraph's text outside inline code, and its inline code spans, each with its line.
pub fn split_code(start: usize, paragraph: &str) -> (Lines, Lines) {
    let (mut prose, mut code) = (Vec::new(), Vec::new());
    let mut line = start;
    let mut rest = paragraph;
    loop {
        let Some(open) = rest.find('`') else {
            prose.push((line, rest.to_owned()));
            break;
        };
        let ticks = rest[open..].chars().take_while(|c| *c == '`').count();
        let marker = "`".repeat(ticks);
        let body_start = open + ticks;
        let Some(len) = rest[body_start..].find(&marker) else {
            prose.push((line, rest.to_owned()));
            break;
        };
        prose.push((line, rest[..open].to_owned()));
        line += rest[..open].matches('\n').count();
        let body = &rest[body_start..body_start + len];
        code.push((line, body.to_owned()));
        line += body.matches('\n').count();
        rest = &rest[body_start + len + ticks..];
    }
    (prose, code)
}

/// `[text](target)` targets in prose, with their line.
pub fn links(prose: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (start, text) in prose {
        let mut offset = 0;
        while let Some(found) = text[offset..].find("](") {
            let at = offset + found + 2;
            let Some(end) = text[at..].find(')') else {
                break;
            };
            let target = text[at..at + end].split_whitespace().next().unwrap_or("");
            out.push((start + text[..at].matches('\n').count(), target.to_owned()));
            offset = at + end;
        }
    }
    out
}

pub fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}
