//! The product's own voice: README.md, docs/ and the command line's help speak of the project,
//! its machines and its users — never of the work sessions that wrote them ("this session",
//! "the next session"), of issue numbers ("issue 6", "(#22)") or of "today". Measurements are
//! dated instead ("measured 2026-11-26 on …").
//!
//! The region API's `Session` type and "the session" of a region are the product's own words:
//! the patterns below name the lab-notebook phrases exactly, word-bounded, so they leave those
//! (and "issue" as in instruction issue, "stops" as in trace stops) alone.

use assert_cmd::Command;
use regex::Regex;
use std::path::{Path, PathBuf};

/// (pattern, what it catches). Case-insensitive, word-bounded.
const PHRASES: &[(&str, &str)] = &[
    (r"\b(this|next|last|previous|earlier|same)\s+session('s)?\b", "a work session"),
    (r"\bsession\s+\d+\b", "a numbered session"),
    (r"\bissues?\s+#?\d+\b", "an issue number"),
    (r"\(#\d+\)", "an issue reference"),
    (r"\bthe issue's\b", "the issue behind a change"),
    (r"\b(today|tonight|yesterday|tomorrow)('s)?\b", "a day relative to the writer"),
    (r"\bstop\s+\d+\b", "a numbered stop of a work plan"),
];

struct Finding {
    line: usize,
    text: String,
    why: &'static str,
}

fn matchers() -> Vec<(Regex, &'static str)> {
    PHRASES
        .iter()
        .map(|(p, why)| (Regex::new(&format!("(?i){p}")).expect("pattern compiles"), *why))
        .collect()
}

/// Every banned phrase in `text`, with its 1-based line.
fn findings(text: &str) -> Vec<Finding> {
    let ms = matchers();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (re, why) in &ms {
            for m in re.find_iter(line) {
                out.push(Finding {
                    line: i + 1,
                    text: m.as_str().to_string(),
                    why,
                });
            }
        }
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/ (recorded tool output, `*.txt`, is verbatim).
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut out);
    out
}

fn report(origin: &str, text: &str) -> Vec<String> {
    findings(text)
        .into_iter()
        .map(|f| format!("{origin}:{}: \"{}\" ({})", f.line, f.text, f.why))
        .collect()
}

#[test]
fn the_matcher_catches_each_phrase_and_spares_the_products_own_words() {
    let bad = "Measured on this session's CI machine.\n\
               The same table on a fresh host the next session.\n\
               As in session 3, see issue 6 and the fix (#22).\n\
               This section belongs to the trace backend (Issue #19).\n\
               Today's kernel; the issue's bound; after stop 4.";
    let found: Vec<String> = findings(bad).iter().map(|f| f.text.to_lowercase()).collect();
    for want in [
        "this session's",
        "next session",
        "session 3",
        "issue 6",
        "(#22)",
        "issue #19",
        "today's",
        "the issue's",
        "stop 4",
    ] {
        assert!(found.iter().any(|f| f == want), "{want:?} not caught; found {found:?}");
    }
    // Line numbers are those of the text.
    assert_eq!(findings(bad).iter().find(|f| f.text == "stop 4").unwrap().line, 5);

    let good = "let mut session = roofline::Session::new(Backend::Auto)?;\n\
                Counters open when the session is created; one session per thread.\n\
                A warp scheduler's issue rate; the issue slots of a core.\n\
                Single-stepping: 100540 -> 4807 stops; the tracer stops at the marker.\n\
                Sessions of several threads report the same region name.\n\
                Measured 2026-11-26 on a 2-vCPU Zen 3 KVM guest; issues are welcome.\n\
                A sessionless run; reissue 4 times; nonstop 3.";
    let spared = findings(good);
    assert!(
        spared.is_empty(),
        "legitimate uses flagged: {:?}",
        spared.iter().map(|f| &f.text).collect::<Vec<_>>()
    );
}

#[test]
fn readme_and_docs_speak_in_the_products_voice() {
    let docs = documents();
    assert!(docs.len() > 5, "README.md and docs/*.md expected, found {docs:?}");
    let mut all = Vec::new();
    for p in &docs {
        let text = std::fs::read_to_string(p).unwrap();
        let origin = p.strip_prefix(repo()).unwrap_or(p).display().to_string();
        all.extend(report(&origin, &text));
    }
    assert!(
        all.is_empty(),
        "write for the product's users, not about the work behind it:\n{}",
        all.join("\n")
    );
}

#[test]
fn help_texts_speak_in_the_products_voice() {
    let help = |args: &[&str]| {
        let o = Command::cargo_bin("roofline").unwrap().args(args).output().unwrap();
        assert!(o.status.success(), "roofline {args:?} failed");
        String::from_utf8(o.stdout).unwrap()
    };
    let top = help(&["--help"]);
    let mut all = report("roofline --help", &top);
    // Every subcommand listed under "Commands:" (clap's layout: two spaces, name, spaces).
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    for c in &commands {
        all.extend(report(&format!("roofline help {c}"), &help(&["help", c])));
    }
    assert!(all.is_empty(), "help text in a lab notebook's voice:\n{}", all.join("\n"));
}
