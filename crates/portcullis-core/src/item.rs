//! `Item`: one text to inspect, with its channel, server, tool and JSON path.

use crate::Channel;

/// One text to inspect, with where it came from. A `tool_definition` is not an
/// item itself: it is walked into many items, one per string field, each with the
/// JSON path of its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub channel: Channel,
    pub server: Option<String>,
    pub tool: Option<String>,
    /// JSON path of the field inside its container (`$.inputSchema.properties.x.description`).
    pub path: Option<String>,
    /// The field is a JSON object key (a schema property name), not a value.
    pub is_key: bool,
    pub text: String,
}

impl Item {
    pub fn new(channel: Channel, text: impl Into<String>) -> Self {
        Item {
            channel,
            server: None,
            tool: None,
            path: None,
            is_key: false,
            text: text.into(),
        }
    }

    pub fn with_server(mut self, server: Option<String>) -> Self {
        self.server = server;
        self
    }

    pub fn with_tool(mut self, tool: Option<String>) -> Self {
        self.tool = tool;
        self
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }
}
