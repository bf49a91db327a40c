//! Label-neutral generators: obfuscating transforms and wrapper frames applied by
//! the corpus build to records of both classes (CASCADE audit, sections 5.6, 6.2:
//! a wrapper applied to one class only teaches a detector the wrapper).

use base64::Engine;
use portcullis_core::Channel;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// Latin letters replaced by Cyrillic look-alikes (every second candidate).
    Homoglyph,
    /// Letters inside longer words written as digits.
    Leet,
    /// A zero-width space after every third letter of each word.
    ZeroWidth,
    /// The whole text Base64-encoded behind a neutral label.
    Base64,
    /// Fullwidth forms of ASCII letters and digits.
    Fullwidth,
}

impl Transform {
    pub const ALL: [Transform; 5] = [
        Transform::Homoglyph,
        Transform::Leet,
        Transform::ZeroWidth,
        Transform::Base64,
        Transform::Fullwidth,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Transform::Homoglyph => "homoglyph",
            Transform::Leet => "leet",
            Transform::ZeroWidth => "zero_width",
            Transform::Base64 => "base64",
            Transform::Fullwidth => "fullwidth",
        }
    }

    /// JSON arguments stay JSON; every other text channel can be obfuscated.
    pub fn applies_to(c: Channel) -> bool {
        !matches!(c, Channel::ToolArguments | Channel::ToolDefinition)
    }

    pub fn apply(self, text: &str) -> String {
        match self {
            Transform::Homoglyph => {
                let mut flip = false;
                text.chars()
                    .map(|c| {
                        let look = match c {
                            'a' => 'а',
                            'e' => 'е',
                            'o' => 'о',
                            'p' => 'р',
                            'c' => 'с',
                            'x' => 'х',
                            'i' => 'і',
                            _ => return c,
                        };
                        flip = !flip;
                        if flip {
                            look
                        } else {
                            c
                        }
                    })
                    .collect()
            }
            Transform::Leet => text
                .split_inclusive(' ')
                .map(|w| {
                    if w.trim().chars().count() > 3 {
                        w.chars()
                            .map(|c| match c {
                                'a' => '4',
                                'e' => '3',
                                'i' => '1',
                                'o' => '0',
                                's' => '5',
                                _ => c,
                            })
                            .collect()
                    } else {
                        w.to_string()
                    }
                })
                .collect(),
            Transform::ZeroWidth => {
                let mut out = String::with_capacity(text.len() * 2);
                let mut run = 0;
                for c in text.chars() {
                    out.push(c);
                    if c.is_alphabetic() {
                        run += 1;
                        if run % 3 == 0 {
                            out.push('\u{200B}');
                        }
                    } else {
                        run = 0;
                    }
                }
                out
            }
            Transform::Base64 => format!(
                "Encoded content (base64): {}",
                base64::engine::general_purpose::STANDARD.encode(text)
            ),
            Transform::Fullwidth => text
                .chars()
                .map(|c| match c {
                    '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c),
                    _ => c,
                })
                .collect(),
        }
    }
}

/// Frames that put a text inside another document. The frame's words carry no
/// label: the same frames wrap benign and malicious records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapper {
    JsonRpcResult,
    Email,
    MarkdownQuote,
    LogLine,
}

impl Wrapper {
    pub const ALL: [Wrapper; 4] = [
        Wrapper::JsonRpcResult,
        Wrapper::Email,
        Wrapper::MarkdownQuote,
        Wrapper::LogLine,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Wrapper::JsonRpcResult => "jsonrpc_result",
            Wrapper::Email => "email",
            Wrapper::MarkdownQuote => "markdown_quote",
            Wrapper::LogLine => "log_line",
        }
    }

    /// Channels whose content is plausibly a document inside another document.
    pub fn applies_to(c: Channel) -> bool {
        matches!(
            c,
            Channel::ToolResult
                | Channel::Resource
                | Channel::UserPrompt
                | Channel::SamplingRequest
        )
    }

    /// The frame's fixed prefix (what a frame-only baseline can read).
    pub fn prefix(self) -> &'static str {
        match self {
            Wrapper::JsonRpcResult => "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":",
            Wrapper::Email => "From: Dana Ortiz <dana.ortiz@corp.example>\nTo: team@corp.example\nSubject: Re: follow-up\n\n",
            Wrapper::MarkdownQuote => "Quoted from the shared notes:\n\n",
            Wrapper::LogLine => "2026-03-04T10:22:31Z INFO tool-output: ",
        }
    }

    pub fn apply(self, text: &str) -> String {
        match self {
            Wrapper::JsonRpcResult => format!(
                "{}{}}}],\"isError\":false}}}}",
                self.prefix(),
                serde_json::Value::String(text.to_string())
            ),
            Wrapper::Email => format!("{}{text}\n\n-- \nDana", self.prefix()),
            Wrapper::MarkdownQuote => {
                let quoted: Vec<String> = text.lines().map(|l| format!("> {l}")).collect();
                format!("{}{}", self.prefix(), quoted.join("\n"))
            }
            Wrapper::LogLine => format!("{}{}", self.prefix(), text.replace('\n', " ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transforms_change_text_but_keep_it_readable_after_folding() {
        let t = "please send the report to the team";
        for tr in Transform::ALL {
            let out = tr.apply(t);
            assert_ne!(out, t, "{}", tr.name());
        }
        assert_eq!(Transform::Fullwidth.apply("ab1"), "ａｂ１");
        assert!(Transform::ZeroWidth.apply("abcdef").contains('\u{200B}'));
    }

    #[test]
    fn wrappers_start_with_their_prefix_and_keep_the_body() {
        for w in Wrapper::ALL {
            let out = w.apply("line one\nline two");
            assert!(out.starts_with(w.prefix()), "{}", w.name());
            assert!(out.contains("line one"), "{}", w.name());
        }
        let json = Wrapper::JsonRpcResult.apply("a \"quoted\" text");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["result"]["content"][0]["text"], "a \"quoted\" text");
    }
}
