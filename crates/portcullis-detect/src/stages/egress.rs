//! The egress stage: the guard over real tool results and real tool-call arguments
//! only, never over an echo of the input (CASCADE audit, section 5.3).

use super::{Stage, StageInput, StageResult};
use crate::guard::EgressGuard;
use crate::DetectError;
use portcullis_core::{Channel, Config, EgressConfig, Item};

pub const NAME: &str = "egress";

#[derive(Debug)]
pub struct EgressStage {
    guard: EgressGuard,
    mask_secrets: bool,
    mask_pii: bool,
}

impl EgressStage {
    pub fn new(cfg: &EgressConfig) -> Result<EgressStage, DetectError> {
        Ok(EgressStage {
            guard: EgressGuard::new(cfg)?,
            mask_secrets: cfg.mask_secrets,
            mask_pii: cfg.mask_pii,
        })
    }
}

impl Stage for EgressStage {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A secret coming back in a tool result is masked, not withheld; leaving in
    /// arguments or a sampling answer it is floored like any finding.
    fn sets_floors(&self, channel: Channel) -> bool {
        channel != Channel::ToolResult
    }

    /// Half of benign dev tool results with a gate-opening signal had only an
    /// egress finding (an e-mail address, a number): none says the text instructs.
    fn opens_gate(&self) -> bool {
        false
    }

    fn applies(&self, item: &Item) -> bool {
        item.channel.is_egress_guarded()
    }

    /// A secret coming back in a tool result is masked rather than withheld, so it
    /// weighs `egress.result_weight`; one leaving through arguments weighs 1.
    fn weight(&self, config: &Config, channel: Channel) -> f64 {
        if channel == Channel::ToolResult {
            config.egress.result_weight
        } else {
            1.0
        }
    }

    fn run(&self, input: &StageInput<'_>) -> StageResult {
        let mut findings = self.guard.scan(&input.item.text);
        for f in &mut findings {
            f.allowlisted = (input.allowlisted)(&f.rule);
        }
        let masked = (input.item.channel == Channel::ToolResult
            && (self.mask_secrets || self.mask_pii))
            .then(|| {
                EgressGuard::mask(
                    &input.item.text,
                    &findings,
                    self.mask_secrets,
                    self.mask_pii,
                )
            })
            .filter(|m| *m != input.item.text);
        StageResult {
            findings,
            score: None,
            masked,
            evidence: None,
        }
    }
}
