//! The documentation against the binary: every `privpred …` command in a shell or console
//! block of README.md and docs/*.md parses with the command line's own parser, docs/cli.md is
//! the binary's `--help` output (regenerate it with `scripts/gen_cli_docs.sh`), every relative
//! link and anchor in the documentation resolves, and the README's five-minute tour runs end to
//! end on the digits data set, its Python step included when `PRIVPRED_PYTHON` names an
//! interpreter with privpred installed (`scripts/build_wheel.sh` runs it against the wheel).
//!
//! Blocks are checked when their language is `sh`, `bash`, `shell` or `console` (in `console`
//! blocks only the `$ ` lines are commands). A block whose info string says `features=nn`
//! (or `features=torch`) is checked only in a build with that feature.
//!
//! Runnable blocks: a shell or console block of docs/*.md whose info string holds the word
//! `runnable` (```` ```console runnable ````) is run, not only parsed. Its commands (the `$ `
//! lines of a `console` block, every line that is neither blank nor a comment of an `sh`,
//! `bash` or `shell` block; a trailing `\` continues a command) run in order with
//! `bash -o pipefail -c`, this build's `privpred` first on the `PATH`, the data cache as usual.
//! A page's runnable blocks share one fresh temporary directory, so a later block sees the files
//! an earlier one wrote. A command must exit with 0, or with `N` when its line ends with the
//! comment `# exit N` (`privpred data schema no-such.csv   # exit 2`); the first that does not
//! fails the test, naming file:line, the command and its standard error. Shown output is not
//! compared. `data=NAME[,NAME…]` in the info string names the data sets a block needs: when one
//! is absent (not cached and not fetchable) the block is skipped and the test prints one
//! `privpred-test-skip:` line, or fails under `PRIVPRED_REQUIRE_DATA=1`.

mod common;

use common::BIN;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Pages that other parts of the guide link to before they are written; a link to one of them
/// is accepted while the file is absent (its anchors are checked once it exists).
const PAGES_WRITTEN_ELSEWHERE: &[&str] = &[
    "docs/selection.md",
    "docs/ledger.md",
    "docs/tables.md",
    "docs/binary.md",
];

/// The environment variable that makes `cli_reference_matches_the_binary` rewrite docs/cli.md.
const UPDATE_ENV: &str = "PRIVPRED_UPDATE_CLI_DOCS";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// README.md, every docs/*.md and CHANGELOG.md.
fn doc_files() -> Vec<PathBuf> {
    let r = root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(r.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut files = vec![r.join("README.md")];
    files.extend(docs);
    files.push(r.join("CHANGELOG.md"));
    files.retain(|p| p.is_file());
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// A fenced code block: its language, the rest of its info string, the line number of its
/// first content line, and its lines.
struct Block {
    lang: String,
    attrs: String,
    first_line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => {
                    let info = info.trim();
                    let (lang, attrs) = info.split_once(' ').unwrap_or((info, ""));
                    open = Some(Block {
                        lang: lang.to_string(),
                        attrs: attrs.to_string(),
                        first_line: i + 2,
                        lines: Vec::new(),
                    });
                }
            }
        } else if let Some(b) = open.as_mut() {
            b.lines.push(line.to_string());
        }
    }
    out
}

/// Whether this build checks a block with these attributes (`features=nn`, `features=torch`).
fn block_enabled(attrs: &str) -> bool {
    attrs
        .split_whitespace()
        .all(|a| a.strip_prefix("features=").is_none_or(feature_enabled))
}

/// Whether this test binary was built with the cargo feature `f` of the crate.
fn feature_enabled(f: &str) -> bool {
    (f == "nn" && cfg!(feature = "nn")) || (f == "torch" && cfg!(feature = "torch"))
}

/// Splits a shell line into words (quotes and backslashes honoured, `$VAR` and `${VAR}`
/// outside single quotes replaced by `0`, a `#` word ends the line); `None` marks a command
/// separator (`&&`, `||`, `|`, `;`, `&`) or a redirection (`>`, `>>`, `2>`, `<`).
fn shell_words(line: &str) -> Vec<Option<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => cur.push(c),
            (None, '\'') | (None, '"') => {
                quote = Some(c);
                in_word = true;
            }
            (_, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (_, '$') => {
                if chars.peek() == Some(&'{') {
                    for n in chars.by_ref() {
                        if n == '}' {
                            break;
                        }
                    }
                } else {
                    while chars
                        .peek()
                        .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
                    {
                        chars.next();
                    }
                }
                cur.push('0');
                in_word = true;
            }
            (Some(_), _) => cur.push(c),
            (None, ' ' | '\t') => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, '#') if !in_word => break,
            (None, _) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
        .into_iter()
        .map(|w| match w.as_str() {
            "&&" | "||" | "|" | ";" | "&" | ">" | ">>" | "2>" | "<" => None,
            _ => Some(w.trim_end_matches(';').to_string()),
        })
        .collect()
}

/// The arguments after `privpred` (or after `cargo run … -p privpred --`) of one command,
/// skipping leading `VAR=value` assignments.
fn privpred_args(words: &[String]) -> Option<Vec<String>> {
    let start = words.iter().position(|w| {
        !(w.contains('=') && w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
    })?;
    let words = &words[start..];
    match words.first()?.as_str() {
        "privpred" => Some(words[1..].to_vec()),
        "cargo" if words.get(1).is_some_and(|w| w == "run") => {
            let p = words.windows(2).any(|w| w[0] == "-p" && w[1] == "privpred");
            let dd = words.iter().position(|w| w == "--")?;
            p.then(|| words[dd + 1..].to_vec())
        }
        _ => None,
    }
}

/// (line, arguments) of every `privpred` command in a shell or console block: each of its
/// [`steps`], split at `;`, `&&`, `|` and the like.
fn commands(b: &Block) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for s in steps(b) {
        for segment in shell_words(&s.cmd).split(|w| w.is_none()) {
            let words: Vec<String> = segment.iter().flatten().cloned().collect();
            if let Some(args) = privpred_args(&words) {
                out.push((s.line, args));
            }
        }
    }
    out
}

fn parse_only(args: &[String]) -> Output {
    common::bin()
        .args(args)
        .env("PRIVPRED_PARSE_ONLY", "1")
        .output()
        .expect("run privpred")
}

#[test]
fn the_extractor_finds_commands_and_the_parse_check_catches_a_wrong_flag() {
    let text = "```sh\nprivpred train dp-sgd --dataset mnist \\\n  --epsilon 1 --delta 1e-5 --out m.safetensors  # a comment\nRAYON_NUM_THREADS=1 privpred reproduce all --shard ${K}/16 --out runs/all-$K && privpred merge runs/a --out r\n# privpred not-a-command\n```\n```console\n$ privpred calibrate model-sensitivity --epsilon 1\nprivpred is not a command here\n```\n```text\nprivpred nor here\n```\n";
    let all: Vec<(usize, Vec<String>)> = blocks(text).iter().flat_map(commands).collect();
    let lines: Vec<String> = all.iter().map(|(_, a)| a.join(" ")).collect();
    assert_eq!(
        lines,
        [
            "train dp-sgd --dataset mnist --epsilon 1 --delta 1e-5 --out m.safetensors",
            "reproduce all --shard 0/16 --out runs/all-0",
            "merge runs/a --out r",
            "calibrate model-sensitivity --epsilon 1",
        ]
    );
    assert_eq!(all[0].0, 2);
    for (_, args) in &all {
        let o = parse_only(args);
        assert!(o.status.success(), "{args:?}: {}", common::stderr(&o));
    }
    let refused: [&[&str]; 3] = [
        &[
            "train",
            "dp-sgd",
            "--dataset",
            "mnist",
            "--epsilon",
            "1",
            "--no-such-flag",
        ][..],
        &["no-such-command"],
        &["calibrate", "no-such-method", "--epsilon", "1"],
    ];
    for bad in refused {
        let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        let o = parse_only(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?} must be refused");
    }
}

#[test]
fn every_documented_command_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for b in blocks(&text).iter().filter(|b| block_enabled(&b.attrs)) {
            for (line, args) in commands(b) {
                checked += 1;
                let o = parse_only(&args);
                if !o.status.success() {
                    let err = common::stderr(&o);
                    let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    failures.push(format!(
                        "{}:{line}: privpred {}\n    {first}",
                        rel(&file),
                        args.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} documented command(s) do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked >= 40,
        "only {checked} commands found in the documentation: is the extraction broken?"
    );
}

// ---------------------------------------------------------------------------------------------
// The CLI reference

fn help(path: &[String]) -> String {
    let o = common::bin()
        .args(path)
        .arg("--help")
        .output()
        .expect("run privpred --help");
    assert!(o.status.success(), "privpred {path:?} --help failed");
    String::from_utf8(o.stdout).expect("UTF-8 help")
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn walk(path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let h = help(&path);
    let subs = subcommands(&h);
    out.push((path.clone(), h));
    for s in subs {
        let mut p = path.clone();
        p.push(s);
        walk(p, out);
    }
}

/// docs/cli.md as the binary would write it.
fn cli_reference() -> String {
    let mut pages = Vec::new();
    walk(Vec::new(), &mut pages);
    let mut s = String::from(
        "# Command-line reference\n\nEvery command's `--help`, as the binary prints it. This page is generated by\n`scripts/gen_cli_docs.sh` and a test checks that it matches the binary. The guide explains\nthe commands by task: [index.md](index.md).\n\n",
    );
    for (path, _) in &pages {
        let name = std::iter::once("privpred")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let indent = "  ".repeat(path.len().saturating_sub(1));
        s.push_str(&format!(
            "{indent}- [`{name}`](#{})\n",
            name.replace(' ', "-")
        ));
    }
    for (path, h) in &pages {
        let name = std::iter::once("privpred")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        s.push_str(&format!("\n## {name}\n\n```text\n{}\n```\n", h.trim_end()));
    }
    s
}

#[test]
fn cli_reference_matches_the_binary() {
    if cfg!(feature = "nn") || cfg!(feature = "torch") {
        eprintln!("docs/cli.md describes the default build; not compared in a feature build");
        return;
    }
    let want = cli_reference();
    let path = root().join("docs/cli.md");
    if std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1") {
        let tmp = path.with_extension("md.tmp");
        std::fs::write(&tmp, &want).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let diff = have
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| {
                format!(
                    "first difference at line {}:\n  docs/cli.md: {a}\n  binary:      {b}",
                    i + 1
                )
            })
            .unwrap_or_else(|| "the files differ in length".into());
        panic!(
            "docs/cli.md does not match the binary's --help; run `bash scripts/gen_cli_docs.sh`\n{diff}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Links and anchors

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` removed,
/// spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings (outside code blocks), numbered as GitHub numbers
/// repeated ones (`x`, `x-1`, `x-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let h = line.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// (line, target) of every markdown link or image outside code blocks and inline code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(p) = rest.find("](") {
            let after = &rest[p + 2..];
            let end = after.find([')', ' ']).unwrap_or(after.len());
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let r = root();
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, target) in links(&text) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let at = format!("{}:{line}: {target}", rel(&file));
            if !dest.exists() {
                let elsewhere = dest
                    .strip_prefix(&r)
                    .ok()
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .is_some_and(|p| PAGES_WRITTEN_ELSEWHERE.contains(&p.as_str()));
                if !elsewhere {
                    failures.push(format!("{at}: no such file"));
                }
                continue;
            }
            if !anchor.is_empty() && dest.extension().is_some_and(|x| x == "md") {
                let t = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&t).contains(anchor) {
                    failures.push(format!("{at}: no heading with anchor #{anchor}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} broken link(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked >= 50,
        "only {checked} links found: is the extraction broken?"
    );
}

#[test]
fn anchors_follow_github() {
    let a = anchors(
        "# A\n## The artifact (`privpred train`, Python `save`)\n## Against diffprivlib (MNIST, δ = 0)\n## Time\n## Time\n```sh\n# not a heading\n```\n",
    );
    for want in [
        "a",
        "the-artifact-privpred-train-python-save",
        "against-diffprivlib-mnist-δ--0",
        "time",
        "time-1",
    ] {
        assert!(a.contains(want), "{want} not in {a:?}");
    }
    assert!(!a.contains("not-a-heading"));
}

// ---------------------------------------------------------------------------------------------
// The README's tour, end to end

/// The tour's section of the README: from its heading to the next `## `.
fn tour_section() -> String {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = text
        .find("## A five-minute tour")
        .expect("the README has a five-minute tour");
    let rest = &text[start + 3..];
    let end = rest.find("\n## ").map_or(text.len(), |e| start + 3 + e);
    text[start..end].to_string()
}

/// Arguments with every `*.safetensors` path made absolute under `dir`.
fn in_dir(args: &[String], dir: &Path) -> Vec<String> {
    args.iter()
        .map(|a| {
            if a.ends_with(".safetensors") && !a.starts_with('/') {
                dir.join(a).to_string_lossy().into_owned()
            } else {
                a.clone()
            }
        })
        .collect()
}

/// Whether the digits data set is in reach (found, or fetched now).
fn digits_available() -> bool {
    let found = |args: &[&str]| {
        common::bin()
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    found(&["data", "info", "digits", "--no-fetch"]) || found(&["data", "fetch", "digits"])
}

/// The JSON body of a tour line `curl … -d '{…}'`.
fn curl_body(line: &str) -> String {
    let words: Vec<String> = shell_words(line).into_iter().flatten().collect();
    let d = words.iter().position(|w| w == "-d").expect("curl -d BODY");
    words[d + 1].clone()
}

#[test]
fn readme_tour_runs_on_digits() {
    let name = "docs_commands::readme_tour_runs_on_digits";
    let found = digits_available().then(|| PathBuf::from("digits"));
    if privpred_data::testdata::or_skip(
        found,
        name,
        "the digits data set (privpred data fetch digits)",
    )
    .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tour = tour_section();
    let mut server: Option<common::Serve> = None;
    let mut ran = BTreeSet::new();
    for b in blocks(&tour).iter().filter(|b| b.lang == "console") {
        for (k, line) in b.lines.iter().enumerate() {
            let Some(cmd) = line.strip_prefix("$ ") else {
                continue;
            };
            let shown: Vec<&str> = b.lines[k + 1..]
                .iter()
                .take_while(|l| !l.starts_with("$ "))
                .map(String::as_str)
                .collect();
            if cmd.starts_with("curl ") {
                let s = server
                    .as_ref()
                    .expect("the tour starts the server before curl");
                let mut c = privpred_serve::client::Client::new(s.addr, None);
                let r = c.post_json("/v1/predict", &curl_body(cmd)).unwrap();
                assert_eq!(r.status, 200, "{}", r.body);
                let j = r.json();
                assert_eq!(j["answers"].as_array().map(Vec::len), Some(1), "{j}");
                assert_eq!(j["spent"], 1, "{j}");
                assert_eq!(
                    j["budget"]["remaining"],
                    j["budget"]["total"].as_u64().unwrap() - 1
                );
                ran.insert("curl".to_string());
                continue;
            }
            let words: Vec<String> = shell_words(cmd).into_iter().flatten().collect();
            let args =
                privpred_args(&words).unwrap_or_else(|| panic!("not a privpred command: {cmd}"));
            let args = in_dir(&args, dir.path());
            ran.insert(args[0].clone());
            match args[0].as_str() {
                "data" => continue, // digits was fetched above
                "serve" => {
                    let mut a = args[1..].to_vec();
                    if let Some(i) = a.iter().position(|w| w == "--listen") {
                        a[i + 1] = "127.0.0.1:0".into();
                    }
                    let a: Vec<&str> = a.iter().map(String::as_str).collect();
                    server = Some(
                        common::spawn_serve(&a)
                            .unwrap_or_else(|(c, e)| panic!("serve (exit {c}): {e}")),
                    );
                    continue;
                }
                _ => {}
            }
            let o = common::bin()
                .args(&args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let out = common::stdout(&o);
            assert!(
                o.status.success(),
                "privpred {}: {}",
                args.join(" "),
                common::stderr(&o)
            );
            match args[0].as_str() {
                "compare" => assert!(
                    out.contains("| recommended |") && out.contains("subsample-aggregate"),
                    "{out}"
                ),
                "train" => {
                    // The deterministic lines the README shows: the data set's shape and the guarantee.
                    for l in shown
                        .iter()
                        .filter(|l| l.starts_with("trained ") || l.starts_with("guarantee:"))
                    {
                        assert!(
                            out.lines().any(|o| o == *l),
                            "train printed\n{out}\nnot the README's line\n{l}"
                        );
                    }
                }
                "evaluate" => assert!(
                    out.contains("test accuracy") && out.contains("359 test examples"),
                    "{out}"
                ),
                "audit" => {
                    let refuted = args.iter().any(|a| a == "paper");
                    let verdict = if refuted { "REFUTED" } else { "consistent" };
                    assert!(
                        out.contains(verdict),
                        "audit {args:?} should say {verdict}:\n{out}"
                    );
                }
                _ => {}
            }
        }
    }
    for step in [
        "data", "compare", "train", "evaluate", "audit", "serve", "curl",
    ] {
        assert!(
            ran.contains(step),
            "the tour lacks its `{step}` step: {ran:?}"
        );
    }
}

// The README's Python step

/// The environment variable naming a Python interpreter with privpred installed.
const PYTHON_ENV: &str = "PRIVPRED_PYTHON";

/// The tour's Python block and the output block after it.
fn tour_python() -> (String, String) {
    let tour = tour_section();
    let bs = blocks(&tour);
    let i = bs
        .iter()
        .position(|b| b.lang == "python")
        .expect("the tour has a Python step");
    let out = bs
        .get(i + 1)
        .filter(|b| b.lang == "text")
        .expect("the tour's Python step shows its output in a `text` block");
    (bs[i].lines.join("\n"), out.lines.join("\n"))
}

/// The README's Python snippet, run by `$PRIVPRED_PYTHON` in a fresh directory: it prints the
/// line the README shows (the accuracy varies with the noise; the guarantee does not), and the
/// artifact it saves is one the CLI evaluates. Skips with its `privpred-test-skip:` line when
/// `PRIVPRED_PYTHON` is unset; an interpreter that is set but cannot run it fails the test.
#[test]
fn readme_python_step_runs() {
    let name = "docs_commands::readme_python_step_runs";
    let (code, shown) = tour_python();
    assert!(
        code.contains("import privpred") && code.contains(".save("),
        "the Python step should train and save a model:\n{code}"
    );
    let Some(python) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) else {
        // Straight to file descriptor 2, as one write: libtest captures `eprintln!`.
        use std::io::Write;
        let line = format!(
            "privpred-test-skip: {name} skipped: {PYTHON_ENV} is not set (an interpreter with privpred installed, e.g. the wheel's venv of scripts/build_wheel.sh)\n"
        );
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // the tests' config directory: `save` signs with the key set that the `privpred`
    // commands below trust
    let o = Command::new(&python)
        .arg("-c")
        .arg(&code)
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", common::CONFIG_HOME)
        .output()
        .unwrap_or_else(|e| panic!("{PYTHON_ENV}={python:?} does not run: {e}"));
    let out = common::stdout(&o);
    assert!(
        o.status.success(),
        "the README's Python step failed under {python:?}:\n{}{out}",
        common::stderr(&o)
    );
    // `accuracy 0.558; model-sensitivity: (10.0, 0.0)-DP, replace-one`: the part after `; `
    // is the guarantee, which must match exactly.
    let (_, want) = shown
        .trim()
        .split_once("; ")
        .expect("the README's output line reads `accuracy A; GUARANTEE`");
    let line = out.trim();
    let (acc, got) = line
        .split_once("; ")
        .unwrap_or_else(|| panic!("unexpected output: {out}"));
    assert_eq!(got, want, "the guarantee printed differs from the README's");
    let acc: f64 = acc
        .strip_prefix("accuracy ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no accuracy in {line}"));
    assert!((0.0..=1.0).contains(&acc), "{line}");
    let file = code
        .split_once(".save(\"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(f, _)| f)
        .expect("the snippet saves to a literal path");
    let saved = dir.path().join(file);
    assert!(saved.is_file(), "the snippet saves {file}");
    if digits_available() {
        let o = common::bin()
            .args(["evaluate", "--model"])
            .arg(&saved)
            .args(["--dataset", "digits"])
            .output()
            .unwrap();
        assert!(
            o.status.success() && common::stdout(&o).contains("model-sensitivity"),
            "privpred evaluate on the Python artifact: {}{}",
            common::stderr(&o),
            common::stdout(&o)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Runnable blocks

/// One command of a runnable block: the page line it starts on, its shell text (continuation
/// lines joined) and the exit code it must end with.
struct Step {
    line: usize,
    cmd: String,
    exit: i32,
}

/// Whether a block's info string marks it `runnable`.
fn is_runnable(b: &Block) -> bool {
    b.attrs.split_whitespace().any(|a| a == "runnable")
}

/// The data sets a block's info string names with `data=NAME[,NAME…]`.
fn block_data(b: &Block) -> Vec<String> {
    b.attrs
        .split_whitespace()
        .filter_map(|a| a.strip_prefix("data="))
        .flat_map(|d| d.split(','))
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

/// The exit code a command declares with a trailing `# exit N` comment; 0 without one.
fn expected_exit(cmd: &str) -> i32 {
    cmd.rsplit_once('#')
        .and_then(|(_, c)| c.trim().strip_prefix("exit "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The commands of a shell or console block, in order: in a `console` block the `$ ` lines, in
/// an `sh`, `bash` or `shell` block every line that is neither blank nor a comment.
fn steps(b: &Block) -> Vec<Step> {
    let console = b.lang == "console";
    if !matches!(b.lang.as_str(), "sh" | "bash" | "shell" | "console") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.lines.len() {
        let start = i;
        let first = &b.lines[i];
        i += 1;
        let cmd = if console {
            first.strip_prefix("$ ")
        } else {
            let t = first.trim();
            (!t.is_empty() && !t.starts_with('#')).then_some(first.as_str())
        };
        let Some(cmd) = cmd else { continue };
        let mut cmd = cmd.to_string();
        while cmd.trim_end().ends_with('\\') && i < b.lines.len() {
            cmd = format!(
                "{} {}",
                cmd.trim_end().trim_end_matches('\\').trim_end(),
                b.lines[i].trim()
            );
            i += 1;
        }
        out.push(Step {
            line: b.first_line + start,
            exit: expected_exit(&cmd),
            cmd,
        });
    }
    out
}

/// Whether the data set `name` is in reach (found, or fetched now).
fn data_available(name: &str) -> bool {
    let found = |args: &[&str]| {
        common::bin()
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    found(&["data", "info", name, "--no-fetch"]) || found(&["data", "fetch", name])
}

/// Runs one step with `bash -o pipefail -c` in `dir`, this build's `privpred` first on the
/// `PATH`; `Err` says where and why when it ends with another exit code than it declares.
fn run_step(file: &str, s: &Step, dir: &Path) -> Result<(), String> {
    let bin_dir = Path::new(BIN).parent().expect("the binary's directory");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let o = Command::new("bash")
        .args(["-o", "pipefail", "-c", &s.cmd])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .output()
        .expect("run bash");
    let code = o.status.code().unwrap_or(-1);
    if code == s.exit {
        return Ok(());
    }
    Err(format!(
        "{file}:{}: $ {}\n    exit {code} (the page expects {})\n    {}",
        s.line,
        s.cmd,
        s.exit,
        common::stderr(&o).trim().replace('\n', "\n    ")
    ))
}

#[test]
fn the_runnable_extractor_reads_steps_data_and_expected_exits() {
    let text = "```console runnable data=digits,wine\n$ privpred calibrate subsample-aggregate \\\n    --epsilon 1 --budget 100\noutput\n$ privpred account dp-sgd --epsilon 0  # exit 2\n```\n```sh runnable\n# a comment\nprintf 'a\\n' > t.csv\n\nprivpred data schema t.csv\n```\n```console\n$ privpred not runnable\n```\n";
    let bs = blocks(text);
    let runnable: Vec<&Block> = bs.iter().filter(|b| is_runnable(b)).collect();
    assert_eq!(runnable.len(), 2);
    assert_eq!(block_data(runnable[0]), ["digits", "wine"]);
    assert!(block_data(runnable[1]).is_empty());
    let s: Vec<(usize, String, i32)> = runnable
        .iter()
        .flat_map(|b| steps(b))
        .map(|s| (s.line, s.cmd, s.exit))
        .collect();
    assert_eq!(
        s,
        [
            (
                2,
                "privpred calibrate subsample-aggregate --epsilon 1 --budget 100".to_string(),
                0
            ),
            (
                5,
                "privpred account dp-sgd --epsilon 0  # exit 2".to_string(),
                2
            ),
            (9, "printf 'a\\n' > t.csv".to_string(), 0),
            (11, "privpred data schema t.csv".to_string(), 0),
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let fails = Step {
        line: 7,
        cmd: "privpred calibrate no-such-method --epsilon 1".into(),
        exit: 0,
    };
    let err = run_step("docs/x.md", &fails, dir.path()).unwrap_err();
    assert!(
        err.starts_with("docs/x.md:7: $ privpred calibrate no-such-method")
            && err.contains("exit 2"),
        "{err}"
    );
    let refused = Step { exit: 2, ..fails };
    run_step("docs/x.md", &refused, dir.path()).unwrap();
}

#[test]
fn every_runnable_block_runs() {
    let name = "docs_commands::every_runnable_block_runs";
    let mut pages = BTreeSet::new();
    let mut ran = 0;
    let mut missing = BTreeSet::new();
    let mut failures = Vec::new();
    let docs = doc_files()
        .into_iter()
        .filter(|p| p.parent() == Some(root().join("docs").as_path()));
    for file in docs {
        let text = std::fs::read_to_string(&file).unwrap();
        let page = rel(&file);
        // One fresh directory per page: its runnable blocks run in order, a later block seeing
        // the files an earlier one wrote.
        let dir = tempfile::tempdir().unwrap();
        let runnable = blocks(&text)
            .into_iter()
            .filter(|b| is_runnable(b) && block_enabled(&b.attrs));
        'blocks: for b in runnable {
            let absent: Vec<String> = block_data(&b)
                .into_iter()
                .filter(|d| !data_available(d))
                .collect();
            if !absent.is_empty() {
                missing.extend(
                    absent
                        .into_iter()
                        .map(|d| format!("{d} ({page}:{})", b.first_line)),
                );
                continue;
            }
            let steps = steps(&b);
            assert!(
                !steps.is_empty(),
                "{page}:{}: a runnable block with no command",
                b.first_line
            );
            pages.insert(page.clone());
            ran += 1;
            for s in &steps {
                if let Err(e) = run_step(&page, s, dir.path()) {
                    failures.push(e);
                    break 'blocks;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} runnable block(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if !missing.is_empty() {
        let what = missing.into_iter().collect::<Vec<_>>().join(", ");
        privpred_data::testdata::or_skip(None, name, &format!("the data of the blocks {what}"));
        return;
    }
    assert!(
        ran >= 6 && pages.len() >= 3,
        "only {ran} runnable block(s) on {} page(s): is the extraction broken?",
        pages.len()
    );
}
