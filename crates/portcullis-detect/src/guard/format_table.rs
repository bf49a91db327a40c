//! The egress formats file (`rules/egress/formats.toml`) checked and turned into the
//! Rust table the guard compiles. `build.rs` runs it (a bad entry fails the build with
//! its file and line); the tests run it on bad files.

use serde::Deserialize;
use std::fmt::Write as _;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FormatsFile {
    version: u32,
    format: Vec<toml::Spanned<Format>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Format {
    rule: String,
    pattern: String,
    #[serde(default)]
    group: usize,
    kind: String,
    severity: String,
    rank: u8,
    edge: String,
    check: String,
    show: String,
    show_chars: Option<usize>,
    #[serde(default)]
    negative: Vec<String>,
}

/// The Rust variant that `name` spells, from its (spelling, variant) table.
fn variant(field: &str, name: &str, table: &[(&str, &str)]) -> Result<String, String> {
    match table.iter().find(|(spelling, _)| *spelling == name) {
        Some((_, v)) => Ok(v.to_string()),
        None => Err(format!(
            "{field} = {name:?} is not one of {:?}",
            table.iter().map(|(s, _)| *s).collect::<Vec<_>>()
        )),
    }
}

/// The Rust source of `SPECS` and `NEGATIVES` from the text of a formats file, or an
/// error naming `origin`, the line of the bad entry and what is wrong.
pub fn rust_table(text: &str, origin: &str) -> Result<String, String> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let file: FormatsFile = toml::from_str(text).map_err(|e| format!("{origin}: {e}"))?;
    if file.version != 1 {
        return Err(format!("{origin}: version {} is not 1", file.version));
    }
    let mut specs = String::from("pub(super) const SPECS: &[Spec] = &[\n");
    let mut negatives =
        String::from("#[cfg(test)]\npub(super) const NEGATIVES: &[(&str, &str)] = &[\n");
    for spanned in &file.format {
        let at = format!("{origin}:{}", line_of(spanned.span().start));
        let f = spanned.get_ref();
        let bad = |msg: String| format!("{at}: format {:?}: {msg}", f.rule);
        if !f.rule.starts_with("egress.") {
            return Err(bad("rule ids start with `egress.`".into()));
        }
        let re = regex_syntax::parse(&f.pattern).map_err(|e| bad(format!("pattern: {e}")))?;
        let groups = re.properties().explicit_captures_len();
        if f.group > groups {
            return Err(bad(format!(
                "group {} but the pattern has {groups}",
                f.group
            )));
        }
        let kind = variant(
            "kind",
            &f.kind,
            &[
                ("secret", "Kind::Secret"),
                ("pii", "Kind::Pii"),
                ("public", "Kind::Public"),
            ],
        )
        .map_err(bad)?;
        let severity = variant(
            "severity",
            &f.severity,
            &[
                ("low", "Severity::Low"),
                ("medium", "Severity::Medium"),
                ("high", "Severity::High"),
                ("critical", "Severity::Critical"),
            ],
        )
        .map_err(bad)?;
        if !(11..100).contains(&f.rank) {
            return Err(bad(format!(
                "rank {} is not between the high-entropy rank 10 and the canary rank 100",
                f.rank
            )));
        }
        let edge = variant(
            "edge",
            &f.edge,
            &[
                ("free", "Edge::Free"),
                ("token", "Edge::Token"),
                ("word", "Edge::Word"),
                ("base64", "Edge::Base64"),
                ("numeric", "Edge::Numeric"),
            ],
        )
        .map_err(bad)?;
        let check = variant(
            "check",
            &f.check,
            &[
                ("any", "Check::Any"),
                ("openai", "Check::OpenAi"),
                ("aws_key_id", "Check::AwsKeyId"),
                ("aws_secret", "Check::AwsSecret"),
                ("slack", "Check::Slack"),
                ("bearer", "Check::Bearer"),
                ("url_password", "Check::UrlPassword"),
                ("email", "Check::Email"),
                ("phone", "Check::Phone"),
                ("card", "Check::Card"),
                ("pem", "Check::Pem"),
            ],
        )
        .map_err(bad)?;
        let show = match (f.show.as_str(), f.show_chars) {
            ("prefix", Some(n)) => format!("Show::Prefix({n})"),
            ("prefix", None) => return Err(bad("show = \"prefix\" needs show_chars".into())),
            (other, None) => variant(
                "show",
                other,
                &[
                    ("pem", "Show::Pem"),
                    ("email", "Show::Email"),
                    ("digits", "Show::Digits"),
                ],
            )
            .map_err(bad)?,
            (_, Some(_)) => return Err(bad("show_chars goes with show = \"prefix\" only".into())),
        };
        writeln!(
            specs,
            "    Spec {{ rule: {:?}, pattern: {:?}, group: {}, kind: {kind}, severity: {severity}, \
             rank: {}, edge: {edge}, check: {check}, show: {show} }},",
            f.rule, f.pattern, f.group, f.rank
        )
        .expect("write to String");
        for n in &f.negative {
            writeln!(negatives, "    ({:?}, {n:?}),", f.rule).expect("write to String");
        }
    }
    specs.push_str("];\n");
    negatives.push_str("];\n");
    specs.push_str(&negatives);
    Ok(specs)
}
