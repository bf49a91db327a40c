//! The HTML of the review page (`portcullis review serve`): the queue, one item,
//! the login form. Everything an item holds came from a server being judged, so
//! every text goes through [`esc`], which also shows the characters a reviewer
//! could not see (bidi overrides, zero-width, tag characters) as visible code
//! points. No script anywhere: the page is forms and links.

use portcullis_controls::store::{QueueItem, PENDING};
use portcullis_core::jsonpath::key_segment;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt::Write;

/// The style sheet, served at `/style.css` (the page's CSP allows only it).
pub const STYLE: &str = include_str!("review_page.css");

/// Whether a character is invisible or reorders text: shown as `U+XXXX`.
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{ad}'
        | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{2800}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}' | '\u{ffa0}' | '\u{fff0}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// Escapes a text for an attribute value: entities only, never markup (a
/// hidden character becomes a numeric reference, not a visible box).
pub fn esc_attr(s: &str) -> String {
    escape(s, |out, c| {
        let _ = write!(out, "&#x{c:X};");
    })
}

/// HTML-escapes a text (element content only: in an attribute use
/// [`esc_attr`]) and makes its hidden characters visible.
pub fn esc(s: &str) -> String {
    escape(s, |out, c| {
        let _ = write!(out, "<span class=\"cc\">U+{c:04X}</span>");
    })
}

/// The five HTML-special characters as entities; each hidden character (its
/// code point) written by `hidden_as`.
fn escape(s: &str, hidden_as: impl Fn(&mut String, u32)) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if hidden(c) => hidden_as(&mut out, u32::from(c)),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{} · Portcullis review</title><link rel=\"stylesheet\" href=\"/style.css\">\
         </head><body><header><a href=\"/\">Portcullis review queue</a></header><main>\n{body}\n\
         </main></body></html>\n",
        esc(title)
    )
}

/// The queue: pending items (or all of them), newest first as the store lists them.
pub fn queue(items: &[QueueItem], all: bool, store: &str) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>{} review items</h1><p class=\"sub\">state store <code>{}</code> · {}</p>",
        if all { "All" } else { "Pending" },
        esc(store),
        if all {
            "<a href=\"/\">pending only</a>"
        } else {
            "<a href=\"/?all=1\">all items</a>"
        }
    );
    if items.is_empty() {
        let _ = write!(
            b,
            "<p id=\"empty\">No {} items.</p>",
            if all { "review" } else { "pending" }
        );
    } else {
        b.push_str(
            "<table id=\"queue\"><thead><tr><th>id</th><th>created</th><th>status</th>\
             <th>kind</th><th>server</th><th>name</th><th>summary</th></tr></thead><tbody>",
        );
        for i in items {
            let _ = write!(
                b,
                "<tr class=\"{cls}\"><td><a class=\"item\" href=\"/item/{id}\">{id}</a></td>\
                 <td>{created}</td><td class=\"status\">{st}</td><td>{kind}</td><td>{server}</td>\
                 <td>{name}</td><td>{summary}</td></tr>",
                id = i.id,
                cls = esc_attr(&i.status),
                created = esc(&i.created),
                st = esc(&i.status),
                kind = esc(&i.kind),
                server = esc(&i.server),
                name = esc(&i.name),
                summary = esc(&i.summary),
            );
        }
        b.push_str("</tbody></table>");
    }
    page(if all { "All items" } else { "Pending items" }, &b)
}

/// One item: what was held and why, the diff of a changed definition side by
/// side, the findings, the decision records, and the decision form while pending.
pub fn item(i: &QueueItem, csrf: &str, message: Option<&str>) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>Item {id} <span class=\"badge {cls}\" id=\"status\">{st}</span></h1>\
         <p class=\"sub\">{kind} · server <code>{server}</code> · <code>{name}</code> · \
         created {created} · hold record <code>{rec}</code></p><p class=\"summary\">{summary}</p>",
        id = i.id,
        st = esc(&i.status),
        cls = esc_attr(&i.status),
        kind = esc(&i.kind),
        server = esc(&i.server),
        name = esc(&i.name),
        created = esc(&i.created),
        rec = esc(&i.record_id),
        summary = esc(&i.summary),
    );
    if let Some(m) = message {
        let _ = write!(b, "<p class=\"message\" id=\"message\">{}</p>", esc(m));
    }
    if let Some(when) = &i.decided_at {
        let _ = write!(
            b,
            "<p class=\"decided\">Decided {}{}{}</p>",
            esc(when),
            if i.remember { " (remembered)" } else { "" },
            i.note
                .as_deref()
                .map(|n| format!("; note: <q>{}</q>", esc(n)))
                .unwrap_or_default()
        );
    }
    if i.status == PENDING {
        decision_form(&mut b, i, csrf);
    }
    if let Some(changes) = i.detail["launch"]["changes"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        b.push_str("<h2>The server's launch changed</h2><ul class=\"launch\">");
        for c in changes {
            let _ = write!(b, "<li>{}</li>", esc(c.as_str().unwrap_or("?")));
        }
        b.push_str("</ul>");
    }
    held_content(&mut b, i);
    findings(&mut b, &i.findings);
    if let Some(path) = i.detail.get("taint").and_then(Value::as_array) {
        b.push_str("<h2>Taint path</h2><ol class=\"taint\">");
        for t in path {
            let _ = write!(b, "<li><code>{}</code></li>", esc(&t.to_string()));
        }
        b.push_str("</ol>");
    }
    record(&mut b, "The hold's decision record", "record", &i.record);
    if !i.decision.is_null() {
        record(
            &mut b,
            "The review's decision record",
            "decision",
            &i.decision,
        );
    }
    page(&format!("Item {}", i.id), &b)
}

fn decision_form(b: &mut String, i: &QueueItem, csrf: &str) {
    let remember = match i.kind.as_str() {
        "definition" => "remember: approve this definition's changes for the server without asking",
        "call" => "remember: allow (or deny) this kind of call to this tool without asking",
        _ => "remember: decide items like this one the same way without asking",
    };
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/item/{id}\" class=\"decide\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label for=\"note\">Note (kept with the decision)</label>\
         <textarea id=\"note\" name=\"note\" rows=\"2\"></textarea>\
         <label class=\"check\"><input type=\"checkbox\" id=\"remember\" name=\"remember\" \
         value=\"on\"> {remember}</label>\
         <div class=\"buttons\"><button id=\"approve\" name=\"decision\" value=\"approve\">\
         Approve</button><button id=\"deny\" name=\"decision\" value=\"deny\" class=\"deny\">\
         Deny</button></div></form>",
        id = i.id,
        csrf = esc_attr(csrf),
        remember = esc(remember),
    );
}

/// What was held: a changed definition as old and new side by side (changed
/// fields marked), or the one held definition, result or call.
fn held_content(b: &mut String, i: &QueueItem) {
    let d = &i.detail;
    let new = d.get("definition").filter(|v| !v.is_null());
    let old = d.get("previous_definition").filter(|v| !v.is_null());
    let changes: Vec<&Value> = i
        .diff
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    match (old, new) {
        (Some(old), Some(new)) => {
            let marked: HashSet<&str> = changes.iter().filter_map(|c| c["path"].as_str()).collect();
            let _ = write!(
                b,
                "<h2>Definition: pinned and held side by side</h2>\
                 <p class=\"sub\">{n} changed field{s} marked <span class=\"chg\">like this</span>\
                 </p><div class=\"sbs\" id=\"diff\"><div><h3>pinned (what the client was given)</h3>\
                 <pre class=\"json\" id=\"pinned\">{o}</pre></div><div><h3>held (what the server \
                 sends now)</h3><pre class=\"json\" id=\"held\">{h}</pre></div></div>",
                n = changes.len(),
                s = if changes.len() == 1 { "" } else { "s" },
                o = tree(old, &marked),
                h = tree(new, &marked),
            );
        }
        (None, Some(def)) => {
            let _ = write!(
                b,
                "<h2>Definition held</h2><pre class=\"json\" id=\"held\">{}</pre>",
                tree(def, &HashSet::new())
            );
        }
        _ => {}
    }
    if !changes.is_empty() {
        b.push_str(
            "<h2>Changed fields</h2><table class=\"changes\"><thead><tr><th>path</th>\
             <th>pinned</th><th>held</th></tr></thead><tbody>",
        );
        for c in &changes {
            let side = |v: &Value| match v {
                Value::Null => "<span class=\"absent\">(absent)</span>".to_string(),
                v => esc(&serde_json::to_string_pretty(v).unwrap_or_default()),
            };
            let _ = write!(
                b,
                "<tr><td><code>{}</code></td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>",
                esc(c["path"].as_str().unwrap_or("?")),
                side(&c["before"]),
                side(&c["after"])
            );
        }
        b.push_str("</tbody></table>");
    }
    if let Some(r) = d.get("result").filter(|v| !v.is_null()) {
        let _ = write!(
            b,
            "<h2>Result held</h2><pre class=\"json\" id=\"held\">{}</pre>",
            tree(r, &HashSet::new())
        );
    }
    if let Some(h) = d.get("arguments_sha256").and_then(Value::as_str) {
        let _ = write!(
            b,
            "<p class=\"sub\">Call arguments (SHA-256 of their canonical form): <code>{}</code>; \
             the arguments themselves are in the hold's record below.</p>",
            esc(h)
        );
    }
}

fn findings(b: &mut String, fs: &Value) {
    let Some(fs) = fs.as_array().filter(|f| !f.is_empty()) else {
        return;
    };
    b.push_str(
        "<h2>Findings</h2><table class=\"findings\"><thead><tr><th>rule</th><th>severity</th>\
         <th>path</th><th>span</th><th>excerpt</th></tr></thead><tbody>",
    );
    for f in fs {
        let _ = write!(
            b,
            "<tr><td><code>{}</code></td><td>{}</td><td><code>{}</code></td><td>{}..{}</td>\
             <td>{}</td></tr>",
            esc(f["rule"].as_str().unwrap_or("?")),
            esc(f["severity"].as_str().unwrap_or("?")),
            esc(f["path"].as_str().unwrap_or("$")),
            // Numbers the gateway wrote; escaped all the same, as the stored
            // JSON is whatever the store holds.
            esc(&f["span"]["start"].to_string()),
            esc(&f["span"]["end"].to_string()),
            esc(f["excerpt"].as_str().unwrap_or(""))
        );
    }
    b.push_str("</tbody></table>");
}

fn record(b: &mut String, title: &str, id: &str, v: &Value) {
    if v.is_null() {
        return;
    }
    let _ = write!(
        b,
        "<details id=\"{id}\"><summary>{}</summary><pre class=\"json\">{}</pre></details>",
        esc(title),
        esc(&serde_json::to_string_pretty(v).unwrap_or_default())
    );
}

/// A JSON value as indented text, each node whose path (as `pins::diff` writes
/// it: `$.inputSchema.properties.x`, `$.tags[0]`) is in `marked` wrapped in a
/// `chg` span.
pub fn tree(v: &Value, marked: &HashSet<&str>) -> String {
    let mut out = String::new();
    node(v, "$", None, 0, false, marked, &mut out);
    out
}

fn node(
    v: &Value,
    path: &str,
    key: Option<&str>,
    depth: usize,
    comma: bool,
    marked: &HashSet<&str>,
    out: &mut String,
) {
    let mark = marked.contains(path);
    let pad = "  ".repeat(depth);
    out.push_str(&pad);
    if mark {
        let _ = write!(out, "<span class=\"chg\" data-path=\"{}\">", esc_attr(path));
    }
    if let Some(k) = key {
        let _ = write!(out, "{}: ", esc(&Value::String(k.to_string()).to_string()));
    }
    let tail = if comma { "," } else { "" };
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push_str("{\n");
            let n = m.len();
            for (j, (k, c)) in m.iter().enumerate() {
                let p = format!("{path}{}", key_segment(k));
                node(c, &p, Some(k), depth + 1, j + 1 < n, marked, out);
            }
            let _ = write!(out, "{pad}}}");
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            let n = a.len();
            for (j, c) in a.iter().enumerate() {
                node(
                    c,
                    &format!("{path}[{j}]"),
                    None,
                    depth + 1,
                    j + 1 < n,
                    marked,
                    out,
                );
            }
            let _ = write!(out, "{pad}]");
        }
        scalar => out.push_str(&esc(&scalar.to_string())),
    }
    out.push_str(tail);
    if mark {
        out.push_str("</span>");
    }
    out.push('\n');
}

/// The form for the token when the page is served off loopback.
pub fn login(failed: bool) -> String {
    page(
        "Sign in",
        &format!(
            "<h1>Sign in</h1>{}<form method=\"post\" action=\"/login\" class=\"decide\">\
             <label for=\"token\">The review page's token (the variable named by --token-env)\
             </label><input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\">\
             <div class=\"buttons\"><button id=\"signin\">Sign in</button></div></form>",
            if failed {
                "<p class=\"message\" id=\"message\">Wrong token.</p>"
            } else {
                ""
            }
        ),
    )
}

/// A page that says what went wrong (escaped like everything else).
pub fn error(title: &str, message: &str) -> String {
    page(
        title,
        &format!(
            "<h1>{}</h1><p class=\"message\" id=\"message\">{}</p>",
            esc(title),
            esc(message)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn held(def: Value, old: Value, diff: Value) -> QueueItem {
        QueueItem {
            id: 7,
            created: "2026-12-04T00:00:00Z".into(),
            kind: "definition".into(),
            server: "kit<b>".into(),
            name: "t".into(),
            fingerprint: String::new(),
            status: PENDING.into(),
            record_id: "r1".into(),
            summary: "changed <img src=x onerror=alert(1)>".into(),
            findings: json!([{"rule": "x", "severity": "high", "path": "$.description",
                "span": {"start": 0, "end": "<b>3</b>"}, "excerpt": "<script>alert(2)</script>"}]),
            diff,
            detail: json!({"definition": def, "previous_definition": old}),
            allow_keys: vec![],
            record: json!({"id": "r1", "note": "</pre><script>alert(3)</script>"}),
            note: None,
            decided_at: None,
            remember: false,
            used: 0,
            decision: Value::Null,
        }
    }

    #[test]
    fn every_text_of_an_item_is_escaped() {
        let i = held(
            json!({"name": "t", "description": "<script>alert(4)</script>", "<k>": 1}),
            json!({"name": "t", "description": "fine"}),
            json!([{"path": "$.description", "before": "fine", "after": "<script>alert(4)</script>"}]),
        );
        let html = item(&i, "tok\"en", None);
        for raw in ["<script", "<img", "</pre><script", "<k>", "<b>", "tok\"en"] {
            assert!(!html.contains(raw), "{raw} reached the page: {html}");
        }
        assert!(html.contains("&lt;script&gt;alert(4)&lt;/script&gt;"));
        assert!(html.contains("value=\"tok&quot;en\""));
    }

    #[test]
    fn a_hidden_character_in_a_key_does_not_break_the_marking() {
        let old = json!({"inputSchema": {"properties": {}}});
        let new = json!({"inputSchema": {"properties": {"evil\u{200b}key": {"description": "x"}}}});
        let diff = serde_json::to_value(portcullis_controls::pins::diff(&old, &new)).unwrap();
        let path = diff[0]["path"].as_str().unwrap();
        let marked: HashSet<&str> = [path].into_iter().collect();
        let html = tree(&new, &marked);
        // The attribute holds entities only (no markup that would end the tag).
        assert!(
            html.contains("data-path=\"$.inputSchema.properties[&quot;evil&#x200B;key&quot;]\">"),
            "{html}"
        );
        assert_eq!(
            strip_tags(&html)
                .replace("U+200B", "\u{200b}")
                .parse::<Value>()
                .ok(),
            Some(new)
        );
    }

    #[test]
    fn hidden_characters_are_shown_as_code_points() {
        let s = esc("pay\u{202e}gnp.exe\u{200b}\u{e0041}");
        assert_eq!(
            s,
            "pay<span class=\"cc\">U+202E</span>gnp.exe<span class=\"cc\">U+200B</span>\
             <span class=\"cc\">U+E0041</span>"
        );
        assert_eq!(esc("naïve café\tx\n"), "naïve café\tx\n");
    }

    #[test]
    fn changed_fields_are_marked_on_both_sides_and_nothing_else_is() {
        let old = json!({"name": "t", "description": "a", "inputSchema": {"properties": {"x": {"type": "string"}}}});
        let new = json!({"name": "t", "description": "b", "inputSchema": {"properties": {"x": {"type": "string"}, "odd key": {"type": "number"}}}});
        let diff = serde_json::to_value(portcullis_controls::pins::diff(&old, &new)).unwrap();
        let marked: HashSet<&str> = diff
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["path"].as_str())
            .collect();
        assert_eq!(marked.len(), 2, "{diff}");
        let (o, n) = (tree(&old, &marked), tree(&new, &marked));
        assert_eq!(o.matches("class=\"chg\"").count(), 1, "{o}");
        assert_eq!(n.matches("class=\"chg\"").count(), 2, "{n}");
        assert!(
            n.contains("data-path=\"$.inputSchema.properties[&quot;odd key&quot;]\""),
            "{n}"
        );
        // Without the marks, the text is the value's JSON.
        let stripped = strip_tags(&n);
        assert_eq!(serde_json::from_str::<Value>(&stripped).unwrap(), new);
    }

    fn strip_tags(s: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in s.chars() {
            match c {
                '<' => in_tag = true,
                '>' if in_tag => in_tag = false,
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }
}
