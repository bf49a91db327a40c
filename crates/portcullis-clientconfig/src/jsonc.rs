//! A JSON parser that keeps the byte span of every value and object key, and
//! accepts what JSON-with-comments files (VS Code's `settings.json`) contain:
//! `//` and `/* */` comments, trailing commas and a leading byte-order mark.
//!
//! The spans are what lets `wrap` edit one server entry in place and leave every
//! other byte of the file — formatting, comments, unknown fields — as it was.

use serde_json::{Map, Value};
use std::ops::Range;

/// Deepest nesting accepted (the parser is recursive).
pub const MAX_DEPTH: usize = 256;

/// A syntax error, with its 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A parsed value and the bytes of the source it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub span: Range<usize>,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Null,
    Bool(bool),
    /// The number's source text (parsed into a JSON number by [`Node::to_value`]).
    Number(String),
    String(String),
    Array(Vec<Node>),
    Object(Vec<Member>),
}

/// One `"key": value` of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    /// The quoted key in the source.
    pub key_span: Range<usize>,
    pub value: Node,
}

impl Member {
    /// From the key's opening quote to the value's last byte.
    pub fn span(&self) -> Range<usize> {
        self.key_span.start..self.value.span.end
    }
}

impl Node {
    /// The value as `serde_json` sees it (a duplicated key keeps its last value).
    pub fn to_value(&self) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Number(n) => serde_json::from_str::<serde_json::Number>(n)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Kind::String(s) => Value::String(s.clone()),
            Kind::Array(a) => Value::Array(a.iter().map(Node::to_value).collect()),
            Kind::Object(m) => {
                let mut out = Map::new();
                for member in m {
                    out.insert(member.key.clone(), member.value.to_value());
                }
                Value::Object(out)
            }
        }
    }

    /// The last member named `key`, if this is an object.
    pub fn member(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Object(m) => m.iter().rev().find(|x| x.key == key),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.member(key).map(|m| &m.value)
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn members(&self) -> &[Member] {
        match &self.kind {
            Kind::Object(m) => m,
            _ => &[],
        }
    }

    pub fn elements(&self) -> &[Node] {
        match &self.kind {
            Kind::Array(a) => a,
            _ => &[],
        }
    }
}

/// Parse a whole document (one value, surrounded by whitespace and comments).
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        src: text,
        b: text.as_bytes(),
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        p.pos = '\u{feff}'.len_utf8();
    }
    p.skip()?;
    let node = p.value(0)?;
    p.skip()?;
    if p.pos < p.b.len() {
        return Err(p.error("unexpected text after the end of the document"));
    }
    Ok(node)
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> SyntaxError {
        let upto = &self.src[..self.src.floor_char_boundary_compat(self.pos)];
        let line = upto.matches('\n').count() + 1;
        let column = upto
            .rsplit('\n')
            .next()
            .map(|l| l.chars().count() + 1)
            .unwrap_or(1);
        SyntaxError {
            line,
            column,
            message: message.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Skip whitespace and comments.
    fn skip(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') => match self.b.get(self.pos + 1) {
                    Some(b'/') => {
                        while let Some(c) = self.peek() {
                            if c == b'\n' {
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                    Some(b'*') => {
                        let start = self.pos;
                        self.pos += 2;
                        loop {
                            match self.peek() {
                                None => {
                                    self.pos = start;
                                    return Err(self.error("unterminated /* comment"));
                                }
                                Some(b'*') if self.b.get(self.pos + 1) == Some(&b'/') => {
                                    self.pos += 2;
                                    break;
                                }
                                Some(_) => self.pos += 1,
                            }
                        }
                    }
                    _ => return Err(self.error("unexpected '/'")),
                },
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        let start = self.pos;
        let kind = match self.peek() {
            None => return Err(self.error("unexpected end of input")),
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(b't') => self.word("true", Kind::Bool(true))?,
            Some(b'f') => self.word("false", Kind::Bool(false))?,
            Some(b'n') => self.word("null", Kind::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.error("expected a JSON value")),
        };
        Ok(Node {
            span: start..self.pos,
            kind,
        })
    }

    fn word(&mut self, w: &str, kind: Kind) -> Result<Kind, SyntaxError> {
        if self.b[self.pos..].starts_with(w.as_bytes()) {
            self.pos += w.len();
            Ok(kind)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let text = &self.src[start..self.pos];
        if serde_json::from_str::<serde_json::Number>(text).is_err() {
            self.pos = start;
            return Err(self.error("malformed number"));
        }
        Ok(Kind::Number(text.to_string()))
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                self.pos = start;
                return Err(self.error("unterminated string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&hi) {
                                // A surrogate pair: `\uD83D\uDE00`.
                                if self.b[self.pos..].starts_with(b"\\u") {
                                    self.pos += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..0xE000).contains(&lo) {
                                        return Err(self.error("invalid surrogate pair"));
                                    }
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            // A lone surrogate cannot be a Rust char: keep a replacement.
                            out.push(ch.unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                0x00..=0x1f => return Err(self.error("control character in a string")),
                _ => {
                    // Copy one whole UTF-8 character.
                    let rest = &self.src[self.pos..];
                    let Some(ch) = rest.chars().next() else {
                        return Err(self.error("unterminated string"));
                    };
                    out.push(ch);
                    self.pos += ch.len_utf8();
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let digits = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("truncated \\u escape"))?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn array(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            self.skip()?;
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Kind::Array(out));
                }
                None => return Err(self.error("unterminated array")),
                _ => {}
            }
            out.push(self.value(depth + 1)?);
            self.skip()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            self.skip()?;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Kind::Object(out));
                }
                Some(b'"') => {}
                None => return Err(self.error("unterminated object")),
                _ => return Err(self.error("expected a quoted key or '}'")),
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            self.skip()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            self.skip()?;
            let value = self.value(depth + 1)?;
            out.push(Member {
                key,
                key_span,
                value,
            });
            self.skip()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }
}

/// `str::floor_char_boundary` is not stable on the minimum Rust version.
trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, i: usize) -> usize {
        let mut i = i.min(self.len());
        while !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_the_source_bytes() {
        let text = "{\n  // a comment\n  \"a\": [1, \"x y\", {\"b\": null},],\n  /* c */ \"é\": \"\\u00e9\\ud83d\\ude00\"\n}\n";
        let n = parse(text).unwrap();
        let a = n.member("a").unwrap();
        assert_eq!(&text[a.key_span.clone()], "\"a\"");
        assert_eq!(&text[a.value.span.clone()], "[1, \"x y\", {\"b\": null},]");
        assert_eq!(n.get("é").unwrap().as_str(), Some("é😀"));
        assert_eq!(
            n.to_value(),
            serde_json::json!({"a": [1, "x y", {"b": null}], "é": "é😀"})
        );
    }

    #[test]
    fn errors_name_line_and_column_and_never_panic() {
        let e = parse("{\n  \"a\": tru\n}").unwrap_err();
        assert_eq!((e.line, e.column), (2, 8));
        for bad in [
            "",
            "{",
            "[",
            "\"",
            "{\"a\"}",
            "{\"a\":}",
            "[1 2]",
            "/* x",
            "\"\\u12\"",
            "{\"é",
            "1 2",
            "[\"\\ud800\\u0041\"]",
            "-",
            "01x",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let deep = "[".repeat(MAX_DEPTH + 5);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn agrees_with_serde_json_on_plain_json() {
        let text = r#"{"n": -1.5e3, "s": "tab\there \"q\" \\", "l": [true, false, null], "o": {}}"#;
        let ours = parse(text).unwrap().to_value();
        let theirs: Value = serde_json::from_str(text).unwrap();
        assert_eq!(ours, theirs);
    }
}
