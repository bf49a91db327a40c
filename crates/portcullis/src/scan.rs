//! `portcullis scan`: inputs in, decision records out.

use crate::DetectorArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use portcullis_core::{Channel, DecisionRecord, Item, Status};
use portcullis_detect::{Detector, RecordMeta};
use serde_json::Value;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes (documented in README and `--help`).
pub const EXIT_ALLOW: u8 = 0;
pub const EXIT_ERROR: u8 = 1;
pub const EXIT_REVIEW: u8 = 3;
pub const EXIT_BLOCK: u8 = 4;
pub const EXIT_BAD_LINES: u8 = 5;

#[derive(Args)]
#[command(
    after_help = "Exit codes: 0 everything ALLOW; 3 something REVIEW (nothing BLOCK); \
4 something BLOCK; 5 some input lines could not be inspected (the rest were); \
2 usage error; 1 other error (unreadable file, bad configuration)."
)]
pub struct ScanArgs {
    /// Text to inspect; `-` reads stdin. Omit to read --file, --input or piped stdin.
    pub text: Option<String>,
    /// Inspect the whole content of a file as one input.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["text", "input"])]
    pub file: Option<PathBuf>,
    /// JSONL batch: one object per line with `id`, and `text` or `tool`; optional
    /// `channel`, `server`, `tool_name`. `-` reads stdin.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "text")]
    pub input: Option<PathBuf>,
    /// Channel of a single input (batch lines carry their own; default user_prompt,
    /// or tool_definition for a `tool` object).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Option<Channel>,
    /// Server the input came from (for allowlists and the record).
    #[arg(long)]
    pub server: Option<String>,
    /// Tool the input belongs to (for allowlists and the record).
    #[arg(long = "tool-name", value_name = "NAME")]
    pub tool_name: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write records here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 0 whatever the decisions (errors still exit non-zero).
    #[arg(long)]
    pub exit_zero: bool,
    /// Also run the structural analyzers over every tool object given (names
    /// across their servers, over-privileged parameters, preference manipulation)
    /// and print a structural record for each tool they have findings on, after
    /// the detector's records.
    #[arg(long)]
    pub structural: bool,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// One JSON record per line.
    Jsonl,
    /// Pretty-printed JSON records.
    Json,
    /// A human summary: status, score, reasons.
    Pretty,
}

/// One parsed input, before inspection.
enum Input {
    Text(Item),
    Tool { tool: Value, server: Option<String> },
}

struct Sink {
    out: Box<dyn Write>,
    format: Format,
    worst: Option<Status>,
    /// Every tool object inspected, with its server (for `--structural`).
    tools: Vec<(Option<String>, Value)>,
}

impl Sink {
    fn keep_tool(&mut self, input: &Input) {
        if let Input::Tool { tool, server } = input {
            self.tools.push((server.clone(), tool.clone()));
        }
    }

    fn emit(&mut self, record: &DecisionRecord) -> Result<()> {
        self.worst = self.worst.max(Some(record.status));
        match self.format {
            Format::Jsonl => writeln!(self.out, "{}", serde_json::to_string(record)?)?,
            Format::Json => writeln!(self.out, "{}", serde_json::to_string_pretty(record)?)?,
            Format::Pretty => {
                let at = [record.server.as_deref(), record.tool.as_deref()]
                    .iter()
                    .flatten()
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/");
                writeln!(
                    self.out,
                    "{:<6} {:.3}  {:<18} {}{}",
                    record.status.as_str(),
                    record.score,
                    record.channel.as_str(),
                    record.id,
                    if at.is_empty() {
                        String::new()
                    } else {
                        format!("  ({at})")
                    }
                )?;
                for r in &record.reasons {
                    writeln!(self.out, "         - {r}")?;
                }
            }
        }
        Ok(())
    }
}

pub fn run(args: ScanArgs) -> Result<ExitCode> {
    let detector = args.detector.load()?;
    let out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut sink = Sink {
        out,
        format: args.format,
        worst: None,
        tools: Vec::new(),
    };
    let mut bad_lines = 0usize;
    let mut position = 0u64;
    if let Some(path) = &args.input {
        (bad_lines, position) = scan_batch(&detector, path, &args, &mut sink)?;
    } else {
        let text = single_text(&args)?;
        for input in single_inputs(&args, text)? {
            sink.keep_tool(&input);
            let record = inspect(&detector, input, new_id(), position)?;
            sink.emit(&record)?;
            position += 1;
        }
    }
    if args.structural {
        structural(&detector, &mut sink, position)?;
    }
    sink.out.flush().context("writing records")?;
    if bad_lines > 0 {
        eprintln!(
            "error: {bad_lines} input line(s) could not be inspected (see above); the others were"
        );
        return Ok(ExitCode::from(EXIT_BAD_LINES));
    }
    if args.exit_zero {
        return Ok(ExitCode::from(EXIT_ALLOW));
    }
    Ok(ExitCode::from(match sink.worst {
        Some(Status::Block) => EXIT_BLOCK,
        Some(Status::Review) => EXIT_REVIEW,
        _ => EXIT_ALLOW,
    }))
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn single_text(args: &ScanArgs) -> Result<String> {
    if let Some(p) = &args.file {
        return std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    }
    match args.text.as_deref() {
        Some("-") => read_stdin(),
        Some(t) => Ok(t.to_string()),
        None if !std::io::stdin().is_terminal() => read_stdin(),
        None => {
            bail!("nothing to scan: give TEXT, --file, --input, or pipe text on stdin (see --help)")
        }
    }
}

fn read_stdin() -> Result<String> {
    let mut s = String::new();
    std::io::stdin()
        .read_to_string(&mut s)
        .context("reading stdin")?;
    Ok(s)
}

/// One input, or for `tool_definition` one per tool: a tool object, a list of
/// them, or a `tools/list` result (`{"tools": [...]}`).
fn single_inputs(args: &ScanArgs, text: String) -> Result<Vec<Input>> {
    let channel = args.channel.unwrap_or(Channel::UserPrompt);
    if channel == Channel::ToolDefinition {
        let value: Value = serde_json::from_str(&text)
            .context("a tool_definition input must be a JSON object or a list of them")?;
        let tools = match value {
            Value::Array(list) => list,
            Value::Object(mut m)
                if !m.contains_key("name") && m.get("tools").is_some_and(Value::is_array) =>
            {
                match m.remove("tools") {
                    Some(Value::Array(list)) => list,
                    _ => Vec::new(),
                }
            }
            other => vec![other],
        };
        return Ok(tools
            .into_iter()
            .map(|tool| Input::Tool {
                tool,
                server: args.server.clone(),
            })
            .collect());
    }
    Ok(vec![Input::Text(
        Item::new(channel, text)
            .with_server(args.server.clone())
            .with_tool(args.tool_name.clone()),
    )])
}

/// `--structural`: the offline analysis (`portcullis_controls::analyze`, the one
/// `audit` runs) over every tool object given, grouped by server in the order
/// first seen; one record per tool with structural findings.
fn structural(detector: &Detector, sink: &mut Sink, mut position: u64) -> Result<()> {
    use portcullis_controls::analyze::{analyze, AnalyzeOptions, ServerSnapshot, Snapshot};
    let mut snapshot = Snapshot::default();
    for (server, tool) in std::mem::take(&mut sink.tools) {
        let name = server.unwrap_or_default();
        match snapshot.servers.iter_mut().find(|s| s.name == name) {
            Some(s) => s.tools.push(tool),
            None => snapshot.servers.push(ServerSnapshot {
                name,
                tools: vec![tool],
                ..Default::default()
            }),
        }
    }
    let opts = AnalyzeOptions {
        detector: false,
        ..Default::default()
    };
    let analysis = analyze(detector, &snapshot, &opts, None).context("structural analysis")?;
    for entry in analysis.entries {
        if let Some(mut record) = entry.structural {
            if record.server.as_deref() == Some("") {
                record.server = None;
            }
            record.position = position;
            position += 1;
            sink.emit(&record)?;
        }
    }
    Ok(())
}

fn inspect(detector: &Detector, input: Input, id: String, position: u64) -> Result<DecisionRecord> {
    let meta = RecordMeta { id, position };
    Ok(match input {
        Input::Text(item) => detector.inspect(&item, meta).record,
        Input::Tool { tool, server } => {
            detector
                .inspect_tool(&tool, server.as_deref(), meta)?
                .record
        }
    })
}

/// Parse one JSONL line into (id, input). Errors say what is wrong, for the line.
fn parse_line(line: &str, args: &ScanArgs) -> Result<(String, Input)> {
    let v: Value = serde_json::from_str(line).context("invalid JSON")?;
    let obj = v.as_object().context("expected a JSON object")?;
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => bail!("\"id\" must be a non-empty string or a number"),
        None => bail!("missing \"id\""),
    };
    let opt_str = |key: &str| -> Result<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => bail!("{key:?} must be a string"),
        }
    };
    let channel: Option<Channel> = opt_str("channel")?
        .map(|c| c.parse::<Channel>())
        .transpose()?
        .or(args.channel);
    let server = opt_str("server")?.or_else(|| args.server.clone());
    let tool_name = opt_str("tool_name")?.or_else(|| args.tool_name.clone());
    match (obj.get("text"), obj.get("tool")) {
        (Some(_), Some(_)) => bail!("has both \"text\" and \"tool\"; give one"),
        (Some(Value::String(text)), None) => {
            let channel = channel.unwrap_or(Channel::UserPrompt);
            if channel == Channel::ToolDefinition {
                bail!("channel tool_definition needs a \"tool\" object, not \"text\"");
            }
            Ok((
                id,
                Input::Text(
                    Item::new(channel, text.clone())
                        .with_server(server)
                        .with_tool(tool_name),
                ),
            ))
        }
        (Some(_), None) => bail!("\"text\" must be a string"),
        (None, Some(tool @ Value::Object(_))) => {
            if channel.is_some_and(|c| c != Channel::ToolDefinition) {
                bail!("a \"tool\" object is a tool_definition; channel says otherwise");
            }
            Ok((
                id,
                Input::Tool {
                    tool: tool.clone(),
                    server,
                },
            ))
        }
        (None, Some(_)) => bail!("\"tool\" must be a JSON object (an MCP tool definition)"),
        (None, None) => bail!("needs \"text\" (string) or \"tool\" (object)"),
    }
}

/// Inspect each line; a bad line is reported by number and skipped, never dropped
/// silently. Returns the number of bad lines and of records written.
fn scan_batch(
    detector: &Detector,
    path: &PathBuf,
    args: &ScanArgs,
    sink: &mut Sink,
) -> Result<(usize, u64)> {
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        ))
    };
    let mut position = 0u64;
    let mut bad = 0usize;
    for (i, line) in reader.lines().enumerate() {
        let lineno = i + 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: {}:{lineno}: unreadable line: {e}", path.display());
                bad += 1;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = parse_line(&line, args).and_then(|(id, input)| {
            sink.keep_tool(&input);
            inspect(detector, input, id, position)
        });
        match parsed {
            Ok(record) => {
                sink.emit(&record)?;
                position += 1;
            }
            Err(e) => {
                eprintln!("error: {}:{lineno}: {e:#}", path.display());
                bad += 1;
            }
        }
    }
    Ok((bad, position))
}
