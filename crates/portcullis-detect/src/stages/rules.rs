//! The rule stage: the compiled rule set over every normalized view.

use super::{Stage, StageInput, StageResult};
use crate::rules::RuleSet;
use std::sync::Arc;

pub const NAME: &str = "rules";

#[derive(Debug)]
pub struct RulesStage {
    rules: Arc<RuleSet>,
}

impl RulesStage {
    pub fn new(rules: Arc<RuleSet>) -> RulesStage {
        RulesStage { rules }
    }
}

impl Stage for RulesStage {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, input: &StageInput<'_>) -> StageResult {
        let views = &input.normalized.views;
        let hits = self.rules.scan(views, input.target);
        StageResult {
            findings: self.rules.findings(&hits, views, &input.item.text),
            ..StageResult::default()
        }
    }
}
