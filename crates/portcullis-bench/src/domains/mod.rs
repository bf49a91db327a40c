//! The scenario domains. Each is one module implementing [`Domain`]: its benign
//! tools (JSON, exactly as served), its seeded state, what a call does to the state
//! (real side effects in the sandbox), how RI poisons its data, and its user tasks
//! with their completion checks. A new domain is one module and one line in [`ALL`].

use crate::sandbox::Sandbox;
use crate::trace::Event;
use crate::Result;
use serde_json::{json, Map, Value};

pub mod banking;
pub mod calendar;
pub mod code;
pub mod email;
pub mod files;
pub mod notes;
pub mod travel;
pub mod web;

/// Every domain, in a fixed order.
pub static ALL: &[&dyn Domain] = &[
    &files::Files,
    &notes::Notes,
    &email::Email,
    &calendar::Calendar,
    &banking::Banking,
    &web::Web,
    &code::Code,
    &travel::Travel,
];

pub fn get(name: &str) -> Result<&'static dyn Domain> {
    ALL.iter()
        .copied()
        .find(|d| d.name() == name)
        .ok_or_else(|| crate::BenchError::Unknown {
            what: "domain",
            name: name.into(),
        })
}

/// The server that hosts the files domain: every trial has it (the agent's
/// workspace: files, processes, HTTP).
pub const WORKSPACE: &str = "files";

/// What a completion check may read: the sandbox and the trial's trace.
pub struct CheckCtx<'a> {
    pub sandbox: &'a Sandbox,
    pub events: &'a [Event],
}

impl CheckCtx<'_> {
    pub fn state(&self, domain: &str) -> Value {
        self.sandbox.state(domain)
    }
    /// Whether any tool result the agent received contains `needle`.
    pub fn saw(&self, needle: &str) -> bool {
        self.events.iter().any(|e| match e {
            Event::Result { text, .. } => text.contains(needle),
            _ => false,
        })
    }
}

/// One step of a task's plan: a tool (by its benign name) and arguments. A string
/// argument may contain `{{N}}`: the text of step N's result.
#[derive(Debug, Clone)]
pub struct Step {
    pub tool: &'static str,
    pub args: Value,
}

/// A user task: the prompt an LLM agent gets, the plan the compliant agent follows,
/// and a pure completion check.
#[derive(Clone)]
pub struct Task {
    pub id: &'static str,
    pub domain: &'static str,
    pub prompt: &'static str,
    pub steps: Vec<Step>,
    /// Some step returns the domain's stored text (so RI's poisoned data is read).
    pub reads: bool,
    pub check: fn(&CheckCtx) -> bool,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("id", &self.id).finish()
    }
}

pub fn step(tool: &'static str, args: Value) -> Step {
    Step { tool, args }
}

/// A domain.
pub trait Domain: Sync {
    fn name(&self) -> &'static str;
    /// The benign tool definitions.
    fn tools(&self) -> Vec<Value>;
    /// Write the initial state into the sandbox.
    fn seed(&self, sb: &Sandbox) -> Result<()>;
    /// Plant `text` in the stored data (RI).
    fn poison(&self, sb: &Sandbox, text: &str) -> Result<()>;
    /// Run a benign tool: the result text, or an error text (an `isError` result).
    fn call(&self, sb: &Sandbox, tool: &str, args: &Map<String, Value>) -> Result<String, String>;
    fn tasks(&self) -> Vec<Task>;
}

/// Every task of every domain.
pub fn all_tasks() -> Vec<Task> {
    ALL.iter().flat_map(|d| d.tasks()).collect()
}

pub fn task(id: &str) -> Option<Task> {
    all_tasks().into_iter().find(|t| t.id == id)
}

// ---- helpers for the domain modules ------------------------------------------

pub fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": required}
    })
}

pub fn s(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

pub fn n(description: &str) -> Value {
    json!({"type": "number", "description": description})
}

pub fn arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string argument `{key}`"))
}

pub fn num(args: &Map<String, Value>, key: &str) -> Result<f64, String> {
    match args.get(key) {
        Some(Value::Number(x)) => x.as_f64().ok_or_else(|| format!("bad number `{key}`")),
        Some(Value::String(t)) => t.trim().parse().map_err(|_| format!("bad number `{key}`")),
        _ => Err(format!("missing number argument `{key}`")),
    }
}

/// Load a JSON domain's state, apply `f`, save it if `f` succeeded.
pub fn with_state<T>(
    sb: &Sandbox,
    domain: &str,
    f: impl FnOnce(&mut Value) -> Result<T, String>,
) -> Result<T, String> {
    let mut st = sb.state(domain);
    if st.is_null() {
        return Err(format!("no state for {domain}"));
    }
    let before = st.clone();
    let out = f(&mut st)?;
    if st != before {
        sb.save_state(domain, &st).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The array `key` of a state object.
pub fn list<'a>(st: &'a mut Value, key: &str) -> Result<&'a mut Vec<Value>, String> {
    st.get_mut(key)
        .and_then(Value::as_array_mut)
        .ok_or_else(|| format!("state has no `{key}`"))
}

/// Append `text` to the string field `field` of every element of array `key`.
pub fn poison_field(sb: &Sandbox, domain: &str, key: &str, field: &str, text: &str) -> Result<()> {
    let mut st = sb.state(domain);
    if let Some(items) = st.get_mut(key).and_then(Value::as_array_mut) {
        for it in items {
            if let Some(Value::String(t)) = it.get_mut(field) {
                t.push_str(text);
            }
        }
    }
    sb.save_state(domain, &st)
}

/// The next id `prefix{n}` for an array of objects with `id`s.
pub fn next_id(items: &[Value], prefix: &str) -> String {
    let max = items
        .iter()
        .filter_map(|i| i.get("id").and_then(Value::as_str))
        .filter_map(|id| id.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    format!("{prefix}{}", max + 1)
}

pub fn find<'a>(items: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    items
        .iter()
        .find(|i| i.get(key).and_then(Value::as_str) == Some(value))
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn eight_domains_forty_tasks_and_every_plan_uses_listed_tools() {
        assert!(ALL.len() >= 8);
        let tasks = all_tasks();
        assert!(tasks.len() >= 40, "{} tasks", tasks.len());
        let ids: BTreeSet<&str> = tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids.len(), tasks.len(), "task ids are unique");
        for d in ALL {
            let own: Vec<String> = d
                .tools()
                .iter()
                .map(|t| str_of(t, "name").to_string())
                .collect();
            let ws: Vec<String> = get(WORKSPACE)
                .unwrap()
                .tools()
                .iter()
                .map(|t| str_of(t, "name").to_string())
                .collect();
            let mine: Vec<&Task> = tasks.iter().filter(|t| t.domain == d.name()).collect();
            assert!(mine.len() >= 5, "{} has {} tasks", d.name(), mine.len());
            for t in mine {
                assert!(t.steps.len() >= 2, "{}", t.id);
                // The first two steps run on the domain's own server (the rug pull
                // lands on the second call).
                for s in &t.steps[..2] {
                    assert!(own.contains(&s.tool.to_string()), "{}: {}", t.id, s.tool);
                }
                for s in &t.steps {
                    assert!(
                        own.contains(&s.tool.to_string()) || ws.contains(&s.tool.to_string()),
                        "{}: {}",
                        t.id,
                        s.tool
                    );
                }
            }
        }
    }

    #[test]
    fn no_task_is_complete_before_it_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let sb = Sandbox::create(
            dir.path(),
            &crate::operands::Operands::draw(1, "t", ""),
            None,
        )
        .unwrap();
        for t in all_tasks() {
            let ctx = CheckCtx {
                sandbox: &sb,
                events: &[],
            };
            assert!(!(t.check)(&ctx), "{} passes its check untouched", t.id);
        }
    }

    #[test]
    fn every_tool_deserializes_as_an_mcp_tool() {
        for d in ALL {
            let tools: Vec<rmcp::model::Tool> =
                serde_json::from_value(Value::Array(d.tools())).unwrap();
            assert!(tools.len() >= 4, "{}", d.name());
        }
    }
}
