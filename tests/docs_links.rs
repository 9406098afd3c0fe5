//! The manual checks itself: README.md and every page under docs/.
//!
//! - Every relative link resolves: the file exists, and a `#anchor` names a heading of it (the
//!   slug GitHub makes: lower case, punctuation dropped, spaces as `-`, `-1`, `-2` for repeats).
//! - Every fenced `yaml` block parses, and each document of it that is one of the operator's
//!   own kinds (Machine, MachineClass, MachineSnapshot, MachineRestore, NetworkConfiguration,
//!   KubevirtConfig) passes the CRD schema the operator generates (the webhooks' own check).
//! - Every `kubevirt-operator ...` command, in `sh`/`bash`/`console` blocks and in inline code,
//!   names subcommands and flags the binary accepts (clap's definition, as `--help` shows it);
//!   so does every `kubectl machine ...` (or `kubectl-machine ...`), held to the plugin's.
//!
//! A block that illustrates rather than runs is marked on the line before its fence with
//! `<!-- docs-check: illustration (why) -->`: it must still parse as YAML, but is not held to
//! the schema (an annotated reference with `...` placeholders, say). Failures name file:line.

mod docs;

use std::collections::HashMap;
use std::path::PathBuf;

use clap::CommandFactory;
use kubevirt_operator::admission::schema::{SchemaCheck, prune_nulls};
use kubevirt_operator::api::crd;
use kubevirt_operator::commands::Cli;
use kubevirt_operator::plugin::args::MachineCli;

use docs::{Block, ILLUSTRATION, Page, anchors, links, pages, parse, rel, slug, split_code};

fn check_link(
    page: &Page,
    line: usize,
    target: &str,
    all: &HashMap<PathBuf, Page>,
) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let resolved = if file.is_empty() {
        page.path.clone()
    } else {
        page.path.parent().expect("in a directory").join(file)
    };
    let at = format!("{}:{line}", rel(&page.path));
    let Ok(resolved) = resolved.canonicalize() else {
        return Some(format!("{at}: link {target:?}: no file {file}"));
    };
    let anchor = anchor?;
    let Some(linked) = all.get(&resolved) else {
        return Some(format!(
            "{at}: link {target:?}: an anchor into a file that is not a checked page"
        ));
    };
    (!anchors(linked).contains(anchor)).then(|| {
        format!(
            "{at}: link {target:?}: {} has no heading with the anchor #{anchor}",
            rel(&linked.path)
        )
    })
}

#[test]
fn every_relative_link_resolves() {
    let all: HashMap<PathBuf, Page> = pages()
        .iter()
        .map(|p| (p.canonicalize().expect("page path"), parse(p)))
        .collect();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in all.values() {
        for (start, paragraph) in &page.paragraphs {
            let (prose, _) = split_code(*start, paragraph);
            for (line, target) in links(&prose) {
                checked += 1;
                problems.extend(check_link(page, line, &target, &all));
            }
        }
    }
    problems.sort();
    assert!(
        checked > 50,
        "only {checked} links found: is the parser still right?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// The operator's kinds and the schema each is checked with.
fn schemas() -> HashMap<String, SchemaCheck> {
    crd::all()
        .into_iter()
        .map(|c| {
            let schema = c.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .map(|s| serde_json::to_value(s).expect("schema as JSON"))
                .expect("every CRD has a schema");
            (
                c.spec.names.kind.clone(),
                SchemaCheck::from_openapi(&schema).expect("the CRD schema compiles"),
            )
        })
        .collect()
}

#[test]
fn every_yaml_block_parses_and_every_manifest_of_ours_passes_its_crd_schema() {
    use serde::Deserialize;
    let schemas = schemas();
    let mut problems = Vec::new();
    let mut validated = 0;
    for page in pages().iter().map(|p| parse(p)) {
        for block in page
            .blocks
            .iter()
            .filter(|b| matches!(b.info.as_str(), "yaml" | "yml"))
        {
            let at = format!("{}:{}", rel(&page.path), block.line);
            for (i, doc) in serde_yaml::Deserializer::from_str(&block.text).enumerate() {
                let value = match serde_json::Value::deserialize(doc) {
                    Ok(v) => v,
                    Err(e) => {
                        problems.push(format!("{at}: document {i} is not YAML: {e}"));
                        break;
                    }
                };
                let ours = value["apiVersion"] == "vitistack.io/v1alpha1";
                let Some(check) = value["kind"]
                    .as_str()
                    .filter(|_| ours)
                    .and_then(|k| schemas.get(k))
                else {
                    continue;
                };
                if block.illustration {
                    continue;
                }
                let mut object = value.clone();
                prune_nulls(&mut object);
                validated += 1;
                for error in check.check(&object) {
                    problems.push(format!("{at}: {} (document {i}): {error}", value["kind"]));
                }
            }
        }
    }
    assert!(
        validated >= 5,
        "only {validated} manifests of ours validated"
    );
    assert!(
        problems.is_empty(),
        "YAML in the docs that does not parse or that its CRD refuses (mark an annotated \
         reference with `{ILLUSTRATION} (why) -->` on the line before its fence):\n{}",
        problems.join("\n")
    );
}

/// The command lines of a shell block: continuations joined; in `console`, `$ ` lines only.
fn command_lines(block: &Block) -> Vec<(usize, String)> {
    let console = block.info == "console";
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (i, line) in block.text.lines().enumerate() {
        let n = block.line + 1 + i;
        let line = if continued {
            let last = out.last_mut().expect("a line to continue");
            last.1.push(' ');
            last.1.push_str(line.trim());
            continued = last.1.ends_with('\\');
            if continued {
                last.1.pop();
            }
            continue;
        } else if console {
            match line.strip_prefix("$ ") {
                Some(l) => l,
                None => continue,
            }
        } else {
            line
        };
        continued = line.ends_with('\\');
        out.push((n, line.trim_end_matches('\\').to_owned()));
    }
    out
}

/// Each `kubevirt-operator ...` invocation in a command line, as its words.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let line = line.split(" #").next().unwrap_or(line);
    let line = line
        .replace("$(", ";")
        .replace("&&", ";")
        .replace("||", ";")
        .replace('|', ";");
    line.split(';')
        .filter_map(|segment| {
            let words: Vec<String> = segment
                .split_whitespace()
                .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                .take_while(|w| !w.starts_with('>') && !w.starts_with('<') && *w != ")")
                .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_owned())
                .collect();
            match words.first().map(String::as_str) {
                Some("kubevirt-operator" | PLUGIN) => Some(words),
                // kubectl runs the plugin for `kubectl machine ...`.
                Some("kubectl") if words.get(1).map(String::as_str) == Some("machine") => {
                    Some([vec![PLUGIN.to_owned()], words[2..].to_vec()].concat())
                }
                _ => None,
            }
        })
        .collect()
}

/// The plugin's name: `kubectl machine` and `kubectl-machine` commands are held to its CLI.
const PLUGIN: &str = "kubectl-machine";

/// Why the binary would refuse these words' subcommands or flags, if it would.
fn refusal(words: &[String]) -> Option<String> {
    let mut cmd = if words[0] == PLUGIN {
        MachineCli::command()
    } else {
        Cli::command()
    };
    cmd.build();
    let mut cmd = &cmd;
    let rest = words[1..].iter().filter(|w| !w.is_empty());
    let mut takes_value = false;
    let mut has_sub = false;
    for word in rest {
        if takes_value {
            takes_value = false;
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(name)) else {
                return Some(format!("{} accepts no --{name}", cmd_name(cmd, words)));
            };
            takes_value = arg.get_action().takes_values() && !inline;
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().expect("not empty");
            let Some(arg) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) else {
                return Some(format!("{} accepts no -{c}", cmd_name(cmd, words)));
            };
            takes_value = arg.get_action().takes_values() && short.len() == 1;
        } else if let Some(sub) = cmd.find_subcommand(word) {
            cmd = sub;
            has_sub = true;
        } else if cmd.get_positionals().next().is_none() {
            return Some(format!(
                "{} has no subcommand {word:?}",
                cmd_name(cmd, words)
            ));
        }
    }
    let help = words.iter().any(|w| w == "--help" || w == "-h");
    (!has_sub && !help).then(|| "names no subcommand".to_owned())
}

fn cmd_name(cmd: &clap::Command, words: &[String]) -> String {
    let name = cmd.get_name();
    if name == "kubevirt-operator" || name == PLUGIN {
        name.to_owned()
    } else {
        let at = words.iter().position(|w| w == name).unwrap_or(0);
        words[..=at].join(" ")
    }
}

#[test]
fn every_kubevirt_operator_command_names_what_the_binary_accepts() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages().iter().map(|p| parse(p)) {
        let mut lines: Vec<(usize, String)> = Vec::new();
        for block in &page.blocks {
            if matches!(block.info.as_str(), "sh" | "bash" | "shell" | "console")
                && !block.illustration
            {
                lines.extend(command_lines(block));
            }
        }
        for (start, paragraph) in &page.paragraphs {
            let (_, code) = split_code(*start, paragraph);
            lines.extend(code.into_iter().filter(|(_, c)| {
                ["kubevirt-operator ", "kubectl machine ", "kubectl-machine "]
                    .iter()
                    .any(|p| c.starts_with(p))
            }));
        }
        for (line, text) in lines {
            for words in invocations(&text.replace('\n', " ")) {
                checked += 1;
                if let Some(why) = refusal(&words) {
                    problems.push(format!(
                        "{}:{line}: `{}`: {why}",
                        rel(&page.path),
                        words.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} commands found: is the parser still right?"
    );
    assert!(
        problems.is_empty(),
        "commands the binary would refuse:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checks_themselves_catch_what_they_should() {
    assert_eq!(
        slug("Admission limits: bounded cost for every body"),
        "admission-limits-bounded-cost-for-every-body"
    );
    assert_eq!(slug("`make dev`, then [docs](x.md)"), "make-dev-then-docs");
    let words = |s: &str| invocations(s).pop().expect("an invocation");
    assert_eq!(refusal(&words("kubevirt-operator certs rotate --ca")), None);
    assert_eq!(
        refusal(&words(
            "KUBECONFIG=k kubevirt-operator run --webhook-url https://h:1"
        )),
        None
    );
    assert_eq!(
        refusal(&words(
            "kubevirt-operator validate -f - | kubectl apply -f -"
        )),
        None
    );
    assert!(refusal(&words("kubevirt-operator certs rotate --cas")).is_some());
    assert!(refusal(&words("kubevirt-operator certz status")).is_some());
    assert!(refusal(&words("kubevirt-operator")).is_some());
    assert_eq!(
        refusal(&words("kubectl machine stop vm-1 -n team-a --grace 300s")),
        None
    );
    assert_eq!(
        refusal(&words("kubectl-machine vnc vm-1 --proxy-only")),
        None
    );
    assert!(refusal(&words("kubectl machine stop vm-1 --grace-period 300")).is_some());
    assert!(refusal(&words("kubectl machine reboot vm-1")).is_some());
    assert_eq!(invocations("kubectl get machines").len(), 0);
    assert_eq!(
        invocations("helm install kubevirt-operator charts/kubevirt-operator").len(),
        0
    );
}
