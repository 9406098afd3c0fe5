//! docs/operator/configuration.md holds one table of every flag and environment variable, and
//! the table is generated from the CLI definition itself (clap's `CommandFactory` of
//! `kubevirt_operator::commands::Cli`), so it cannot drift from what the binary accepts: this test
//! renders it and fails, with the lines that differ, when the committed table is not the same.
//!
//! `UPDATE_DOCS=1 cargo test --test docs_config` rewrites the table between its markers; review
//! the change (a help text is a doc comment in `src/cli.rs` and the files its structs live in).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::CommandFactory;
use kubevirt_operator::commands::Cli;

const BEGIN: &str =
    "<!-- BEGIN GENERATED settings: tests/docs_config.rs, UPDATE_DOCS=1 rewrites it -->";
const END: &str = "<!-- END GENERATED settings -->";

fn configuration_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/operator/configuration.md")
}

/// One row: a flag as one or more commands define it alike.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Setting {
    /// The long name first, so that rows sort by it.
    long: String,
    flag: String,
    env: String,
    default: String,
    help: String,
}

/// Every argument of every command, rows of identical definitions merged, sorted by flag.
fn settings() -> BTreeMap<Setting, Vec<String>> {
    let mut rows: BTreeMap<Setting, Vec<String>> = BTreeMap::new();
    collect(&Cli::command(), "", &mut rows);
    rows
}

fn collect(cmd: &clap::Command, path: &str, rows: &mut BTreeMap<Setting, Vec<String>>) {
    let here = if path.is_empty() {
        "every command".to_owned()
    } else {
        path.to_owned()
    };
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let mut flag = format!("`--{long}`");
        if let Some(short) = arg.get_short() {
            flag = format!("`-{short}`, {flag}");
        }
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let default = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(",");
        let default = match default.as_str() {
            "" if arg.is_required_set() => "(required)".to_owned(),
            "" if !arg.get_action().takes_values() => "(off)".to_owned(),
            "" if !arg.get_default_values().is_empty() => "(empty)".to_owned(),
            "" => "(unset)".to_owned(),
            d => format!("`{d}`"),
        };
        let mut help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() && !matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            help = format!("{help}; one of {}", values.join(", "));
        }
        let setting = Setting {
            long: long.to_owned(),
            flag,
            env,
            default,
            help: one_line(&help),
        };
        rows.entry(setting).or_default().push(here.clone());
    }
    for sub in cmd.get_subcommands() {
        let name = if path.is_empty() {
            sub.get_name().to_owned()
        } else {
            format!("{path} {}", sub.get_name())
        };
        collect(sub, &name, rows);
    }
}

/// A help text as one table cell: its lines joined, pipes escaped.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn render() -> String {
    let mut out = String::from(
        "| flag | environment | default | commands | meaning |\n|---|---|---|---|---|\n",
    );
    for (s, commands) in settings() {
        let commands = commands
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "| {} | {} | {} | {commands} | {} |\n",
            s.flag, s.env, s.default, s.help
        ));
    }
    out
}

/// The lines only one side has, in order, marked `-` (docs) and `+` (generated).
fn line_diff(docs: &str, generated: &str) -> String {
    let d: Vec<&str> = docs.lines().collect();
    let g: Vec<&str> = generated.lines().collect();
    let mut out = String::new();
    for line in &d {
        if !g.contains(line) {
            out.push_str(&format!("- {line}\n"));
        }
    }
    for line in &g {
        if !d.contains(line) {
            out.push_str(&format!("+ {line}\n"));
        }
    }
    if out.is_empty() {
        out.push_str("(the same lines in another order)\n");
    }
    out
}

#[test]
fn the_settings_table_is_the_cli_definition() {
    let path = configuration_md();
    let text = std::fs::read_to_string(&path).expect("docs/operator/configuration.md");
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{}: no line {BEGIN}", path.display()))
        + BEGIN.len()
        + 1;
    let end = text[start..]
        .find(END)
        .unwrap_or_else(|| panic!("{}: no line {END} after the begin marker", path.display()))
        + start;
    let committed = &text[start..end];
    let generated = render();
    if committed == generated {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{generated}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).expect("write docs/operator/configuration.md");
        return;
    }
    panic!(
        "{}: the settings table differs from the CLI definition (src/cli.rs and the Args structs \
         it flattens).\n{}Rewrite it with: UPDATE_DOCS=1 cargo test --test docs_config",
        path.display(),
        line_diff(committed, &generated)
    );
}

#[test]
fn every_setting_has_help_and_shared_definitions_share_a_row() {
    let rows = settings();
    assert!(
        rows.keys().any(|s| s.env == "`ALLOWED_BRIDGES`"),
        "the walk reaches the flattened Args structs"
    );
    assert!(
        rows.iter().any(|(s, c)| s.flag == "`--drain-period`"
            && c.contains(&"run".to_owned())
            && c.contains(&"webhook".to_owned())),
        "identical definitions of run and webhook share a row"
    );
    for (s, _) in rows {
        assert!(!s.help.is_empty(), "{} has no help text in the CLI", s.flag);
    }
}
