//! `Channel`: where a text comes from or goes to (a tool description, a tool result,
//! tool-call arguments, …), with its canonical snake_case name; the channel decides
//! which stages run and which thresholds apply.

use crate::CoreError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Every place an MCP server can put text in front of the model, or the model can
/// send text out. The snake_case names are canonical: CLI, records and config use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    UserPrompt,
    ServerInstructions,
    ToolName,
    ToolDescription,
    ToolSchema,
    /// A whole MCP tool object; walked field by field into the channels above.
    ToolDefinition,
    ToolResult,
    Resource,
    Prompt,
    SamplingRequest,
    ToolArguments,
    /// The client's answer to a server's request (sampling, elicitation), on its
    /// way back to that server: egress, like tool-call arguments.
    SamplingResponse,
}

impl Channel {
    pub const ALL: [Channel; 12] = [
        Channel::UserPrompt,
        Channel::ServerInstructions,
        Channel::ToolName,
        Channel::ToolDescription,
        Channel::ToolSchema,
        Channel::ToolDefinition,
        Channel::ToolResult,
        Channel::Resource,
        Channel::Prompt,
        Channel::SamplingRequest,
        Channel::ToolArguments,
        Channel::SamplingResponse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::UserPrompt => "user_prompt",
            Channel::ServerInstructions => "server_instructions",
            Channel::ToolName => "tool_name",
            Channel::ToolDescription => "tool_description",
            Channel::ToolSchema => "tool_schema",
            Channel::ToolDefinition => "tool_definition",
            Channel::ToolResult => "tool_result",
            Channel::Resource => "resource",
            Channel::Prompt => "prompt",
            Channel::SamplingRequest => "sampling_request",
            Channel::ToolArguments => "tool_arguments",
            Channel::SamplingResponse => "sampling_response",
        }
    }

    /// Channels whose content flows out of, or back from, a tool execution: the
    /// egress guard (secrets, canaries, PII) runs on these and only these, so it
    /// never sees an echo of the input (CASCADE audit, section 5.3).
    pub fn is_egress_guarded(self) -> bool {
        matches!(
            self,
            Channel::ToolResult | Channel::ToolArguments | Channel::SamplingResponse
        )
    }

    /// Channels whose text goes out to a server rather than toward the model:
    /// only the egress guard reads them. Whether a text reads like an injection
    /// (rules, learned stages) is a question about what the model is shown.
    pub fn is_outbound_only(self) -> bool {
        matches!(self, Channel::SamplingResponse)
    }

    /// A server's description of itself and its tools, read by the model before
    /// any call: floored more strictly for some findings (`Floors::metadata`).
    pub fn is_metadata(self) -> bool {
        matches!(
            self,
            Channel::ServerInstructions
                | Channel::ToolName
                | Channel::ToolDescription
                | Channel::ToolSchema
                | Channel::ToolDefinition
        )
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Channel {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Channel::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Channel::ALL.iter().map(|c| c.as_str()).collect();
                CoreError::UnknownChannel(s.to_string(), names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_str_and_serde() {
        for c in Channel::ALL {
            assert_eq!(c.as_str().parse::<Channel>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<Channel>(&json).unwrap(), c);
        }
    }

    #[test]
    fn unknown_channel_lists_valid_names() {
        let err = "tool_descr".parse::<Channel>().unwrap_err().to_string();
        assert!(err.contains("tool_description"), "{err}");
    }
}
