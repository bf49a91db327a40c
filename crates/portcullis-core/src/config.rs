//! The detector's configuration (`Config`): stages, weights, per-channel thresholds,
//! allowlists, egress and normalization caps, floors and review; the embedded presets
//! (`strict`, `balanced`, `permissive`); loading with file and line on errors, and
//! the canonical hash every record carries.

use crate::{Channel, CoreError, Floors, ReviewConfig, Severity};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// Decision thresholds on the fused score: `score >= block` => BLOCK,
/// else `score >= review` => REVIEW, else ALLOW. Constants of the loaded
/// configuration; nothing changes them at run time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub review: f64,
    pub block: f64,
}

/// How much one fired rule of each severity contributes (see `Config` docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeverityWeights {
    pub low: f64,
    pub medium: f64,
    pub high: f64,
    pub critical: f64,
}

impl SeverityWeights {
    pub fn weight(&self, s: Severity) -> f64 {
        match s {
            Severity::Low => self.low,
            Severity::Medium => self.medium,
            Severity::High => self.high,
            Severity::Critical => self.critical,
        }
    }
}

/// Suppress rule ids for a server and/or tool (absent = any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowEntry {
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    pub rules: Vec<String>,
}

impl AllowEntry {
    pub fn covers(&self, server: Option<&str>, tool: Option<&str>, rule: &str) -> bool {
        let field_ok = |want: &Option<String>, have: Option<&str>| match want {
            None => true,
            Some(w) => have == Some(w.as_str()),
        };
        field_ok(&self.server, server)
            && field_ok(&self.tool, tool)
            && self.rules.iter().any(|r| r == rule)
    }
}

/// Settings of the egress guard (tool results and tool-call arguments only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// Literal canary tokens planted by the operator; any occurrence is critical.
    pub canaries: Vec<String>,
    /// Replace detected secrets in tool results with placeholders.
    pub mask_secrets: bool,
    /// Replace detected PII (emails, phone numbers, payment cards) in tool results.
    pub mask_pii: bool,
    /// Shannon entropy (bits per char) above which a long token counts as a likely secret.
    pub entropy_bits: f64,
    /// Minimum token length for the entropy check.
    pub entropy_min_len: usize,
    /// Weight of the egress stage in the fusion for `tool_result` items (a secret
    /// coming back from a tool is masked rather than withheld, so it weighs less than
    /// one leaving through `tool_arguments`, which weighs 1).
    pub result_weight: f64,
}

/// Caps on normalization; decoding stops at whichever is hit first.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeConfig {
    pub max_decode_depth: usize,
    /// Total bytes all decoded views together may hold, per input.
    pub max_decoded_bytes: usize,
    /// Maximum number of decoded segments per input.
    pub max_decoded_segments: usize,
}

impl Default for NormalizeConfig {
    fn default() -> Self {
        NormalizeConfig {
            max_decode_depth: 3,
            max_decoded_bytes: 256 * 1024,
            max_decoded_segments: 256,
        }
    }
}

/// The learned lexical stage (hashed n-grams, linear model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LexicalConfig {
    pub enabled: bool,
    /// Weight of its probability in the fusion.
    pub weight: f64,
    /// Model file; absent = the model embedded in the binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Default for LexicalConfig {
    fn default() -> Self {
        LexicalConfig {
            enabled: false,
            weight: 1.0,
            model: None,
        }
    }
}

/// The embedding stage (all-MiniLM-L6-v2 + a classifier head; see docs/policy.md).
/// Every key may be omitted in a file (the defaults below apply).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    pub enabled: bool,
    /// Weight of its probability in the fusion.
    pub weight: f64,
    /// Directory with the model files (`scripts/fetch-models.sh` installs them).
    /// A relative path is taken from the working directory, else from where the
    /// executable is installed (`portcullis_core::resolve_install_path`), never
    /// from a path compiled into the binary.
    pub models_dir: String,
    /// Classifier head file; absent = the head embedded in the binary. A relative
    /// path is resolved as `models_dir` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Nearest-neighbour index file; absent = the index embedded in the binary.
    /// A relative path is resolved as `models_dir` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// Nearest training examples reported as evidence (0 = none).
    pub k: usize,
    /// Content tokens per chunk of a long text (1..=254; chunks end on sentence
    /// boundaries where one fits).
    pub chunk_tokens: usize,
    /// A cascade: when above 0, the stage reads an item only when an earlier
    /// stage scored it at least this much or found something on it, so the cheap
    /// stages clear most traffic and the model reads the rest. 0 (the default) =
    /// every item.
    #[serde(skip_serializing_if = "is_zero")]
    pub gate: f64,
    /// Bytes of an item the stage reads at most (at least 1024): a longer text is
    /// read as its first and last halves of this, and the record says how many
    /// bytes were left unread. The cheap stages read every byte. Not written when
    /// it is the default, so configurations keep their hash.
    #[serde(skip_serializing_if = "is_default_max_bytes")]
    pub max_bytes: usize,
    /// Chunks of an item the model scores at most (0, the default = every chunk).
    /// A text with more chunks has only those the lexical model rates most
    /// suspicious scored (with the lexical stage off: the first and last ones), so
    /// a 64 KiB result costs a bounded number of model runs; the record counts the
    /// bytes of the chunks not scored as unread. Not written when 0.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub max_chunks: usize,
    /// Channels the stage reads (empty, the default = every channel the learned
    /// stages read): a model measured to help on some channels (tool results,
    /// resources) need not score the others (prompts, which are instructions by
    /// design). Not written when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<Channel>,
    /// What runs the model: `onnx` (ONNX Runtime, the default) or `candle`.
    pub backend: EmbeddingBackend,
    /// The ONNX Runtime library for backend `onnx` (`scripts/fetch-models.sh`
    /// installs it); a relative path is resolved as `models_dir` is. Loaded
    /// only if its SHA-256 is the pinned build's
    /// (`portcullis_embed::ONNXRUNTIME_SHA256`).
    pub onnxruntime: String,
}

/// The embedding stage's backend (see docs/policy.md). Both compute the same
/// embeddings (the reference test holds each to sentence-transformers'); ONNX
/// Runtime is the faster, candle the portable one (pure Rust, no library).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingBackend {
    #[default]
    Onnx,
    Candle,
}

impl std::str::FromStr for EmbeddingBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "onnx" => Ok(EmbeddingBackend::Onnx),
            "candle" => Ok(EmbeddingBackend::Candle),
            other => Err(format!(
                "unknown embedding backend {other:?} (onnx or candle)"
            )),
        }
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

const DEFAULT_MAX_BYTES: usize = 64 * 1024;

fn is_default_max_bytes(n: &usize) -> bool {
    *n == DEFAULT_MAX_BYTES
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            enabled: false,
            weight: 1.0,
            models_dir: "models/all-MiniLM-L6-v2".into(),
            head: None,
            index: None,
            k: 5,
            chunk_tokens: 254,
            gate: 0.0,
            max_bytes: DEFAULT_MAX_BYTES,
            max_chunks: 0,
            channels: Vec::new(),
            backend: EmbeddingBackend::Onnx,
            onnxruntime: "models/onnxruntime/libonnxruntime.so.1.22.1".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    Strict,
    Balanced,
    Permissive,
}

impl std::str::FromStr for Preset {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(Preset::Strict),
            "balanced" => Ok(Preset::Balanced),
            "permissive" => Ok(Preset::Permissive),
            other => Err(CoreError::UnknownPreset(other.to_string())),
        }
    }
}

/// The loaded configuration. Its canonical JSON is hashed into every record.
///
/// Fusion (documented in docs/policy.md): a stage's score is the noisy-OR of the
/// severity weights of its distinct counted findings, `1 - prod(1 - w(sev))`; the
/// fused score is the noisy-OR of the stage scores times their stage weights,
/// `1 - prod_s(1 - weight_s * score_s)`. The status is the higher of the fused
/// score's comparison with the channel's thresholds (`thresholds_for`) and the floor
/// the deterministic findings set (`floors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub preset: Preset,
    pub thresholds: Thresholds,
    /// Thresholds of one channel, calibrated on that channel's dev records; a
    /// channel not listed uses `thresholds`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub channel_thresholds: BTreeMap<Channel, Thresholds>,
    /// What a deterministic finding decides on its own; absent = the balanced table.
    #[serde(default)]
    pub floors: Floors,
    pub severity_weights: SeverityWeights,
    pub normalize: NormalizeConfig,
    pub egress: EgressConfig,
    pub lexical: LexicalConfig,
    /// Absent from a file = disabled (older presets and configurations parse).
    #[serde(default)]
    pub embedding: EmbeddingConfig,
    /// The LLM review stage; absent from a file = disabled.
    #[serde(default)]
    pub review: ReviewConfig,
    pub allow: Vec<AllowEntry>,
}

const PRESET_STRICT: &str = include_str!("../../../presets/strict.toml");
const PRESET_BALANCED: &str = include_str!("../../../presets/balanced.toml");
const PRESET_PERMISSIVE: &str = include_str!("../../../presets/permissive.toml");

/// The on-disk form: every field optional, applied on top of `preset`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    preset: Option<Preset>,
    thresholds: Option<Thresholds>,
    channel_thresholds: Option<BTreeMap<Channel, Thresholds>>,
    /// Merged key by key onto the preset's `[floors]`.
    floors: Option<toml::Table>,
    severity_weights: Option<SeverityWeights>,
    normalize: Option<NormalizeConfig>,
    egress: Option<EgressFile>,
    lexical: Option<LexicalFile>,
    embedding: Option<EmbeddingConfig>,
    /// Merged key by key onto the preset's `[review]` (see `merge_review`).
    review: Option<toml::Table>,
    #[serde(default)]
    allow: Vec<AllowEntry>,
}

/// `[lexical]` in a file: absent keys keep the preset's values.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LexicalFile {
    enabled: Option<bool>,
    weight: Option<f64>,
    model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EgressFile {
    canaries: Option<Vec<String>>,
    mask_secrets: Option<bool>,
    mask_pii: Option<bool>,
    entropy_bits: Option<f64>,
    entropy_min_len: Option<usize>,
    result_weight: Option<f64>,
}

/// `[review]` in a file changes only the keys it gives (tables such as `moves`
/// key by key too): a file that says `enabled = true` keeps the preset's
/// calibrated band. Unknown keys are errors.
fn merge_review(
    preset: &ReviewConfig,
    file: toml::Table,
    origin: &str,
) -> Result<ReviewConfig, CoreError> {
    merge_table(preset, file, origin, "review")
}

/// A section of a file merged key by key onto the preset's (nested tables too).
fn merge_table<T: Serialize + serde::de::DeserializeOwned>(
    preset: &T,
    file: toml::Table,
    origin: &str,
    section: &str,
) -> Result<T, CoreError> {
    fn merge(base: &mut toml::Table, over: toml::Table) {
        for (k, v) in over {
            match (base.get_mut(&k), v) {
                (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
                (_, v) => {
                    base.insert(k, v);
                }
            }
        }
    }
    let err = |message: String| CoreError::ConfigParse {
        path: origin.to_string(),
        message: format!("[{section}]: {message}"),
    };
    let mut base = toml::Table::try_from(preset).map_err(|e| err(e.to_string()))?;
    merge(&mut base, file);
    toml::Value::Table(base)
        .try_into()
        .map_err(|e: toml::de::Error| err(e.to_string()))
}

impl Default for Config {
    fn default() -> Self {
        Config::preset(Preset::Balanced)
    }
}

impl Config {
    /// A shipped preset. The preset files live in `presets/` and are written by
    /// `portcullis calibrate` (thresholds fitted on the corpus's dev split; each
    /// file's header names the corpus and targets). They are embedded at build time
    /// and checked by this crate's tests, so parsing them cannot fail at run time.
    pub fn preset(preset: Preset) -> Config {
        let text = match preset {
            Preset::Strict => PRESET_STRICT,
            Preset::Balanced => PRESET_BALANCED,
            Preset::Permissive => PRESET_PERMISSIVE,
        };
        match toml::from_str::<Config>(text) {
            Ok(c) => c,
            Err(e) => panic!("embedded preset {preset:?} is invalid (a test catches this): {e}"),
        }
    }

    /// Parse a TOML configuration; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, CoreError> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| CoreError::ConfigParse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        let mut cfg = Config::preset(file.preset.unwrap_or(Preset::Balanced));
        if let Some(t) = file.thresholds {
            // A file's own global thresholds mean every channel: the preset's
            // per-channel ones go unless the file names its own.
            cfg.thresholds = t;
            cfg.channel_thresholds.clear();
        }
        if let Some(c) = file.channel_thresholds {
            cfg.channel_thresholds.extend(c);
        }
        if let Some(f) = file.floors {
            cfg.floors = merge_table(&cfg.floors, f, origin, "floors")?;
        }
        if let Some(w) = file.severity_weights {
            cfg.severity_weights = w;
        }
        if let Some(n) = file.normalize {
            cfg.normalize = n;
        }
        if let Some(e) = file.egress {
            let g = &mut cfg.egress;
            g.canaries = e.canaries.unwrap_or_default();
            g.mask_secrets = e.mask_secrets.unwrap_or(g.mask_secrets);
            g.mask_pii = e.mask_pii.unwrap_or(g.mask_pii);
            g.entropy_bits = e.entropy_bits.unwrap_or(g.entropy_bits);
            g.entropy_min_len = e.entropy_min_len.unwrap_or(g.entropy_min_len);
            g.result_weight = e.result_weight.unwrap_or(g.result_weight);
        }
        if let Some(l) = file.lexical {
            let x = &mut cfg.lexical;
            x.enabled = l.enabled.unwrap_or(x.enabled);
            x.weight = l.weight.unwrap_or(x.weight);
            x.model = l.model.or(x.model.take());
        }
        if let Some(e) = file.embedding {
            cfg.embedding = e;
        }
        if let Some(r) = file.review {
            cfg.review = merge_review(&cfg.review, r, origin)?;
        }
        cfg.allow = file.allow;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn load(path: &Path) -> Result<Config, CoreError> {
        let text = std::fs::read_to_string(path).map_err(|source| CoreError::ConfigIo {
            path: path.display().to_string(),
            source,
        })?;
        Config::from_toml_str(&text, &path.display().to_string())
    }

    /// Reject configurations that cannot mean what their author intended.
    pub fn validate(&self) -> Result<(), CoreError> {
        let unit = |name: &str, v: f64| {
            if v.is_finite() && (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(CoreError::ConfigInvalid(format!(
                    "{name} must be within [0, 1], got {v}"
                )))
            }
        };
        let t = &self.thresholds;
        unit("thresholds.review", t.review)?;
        unit("thresholds.block", t.block)?;
        if t.review <= 0.0 {
            return Err(CoreError::ConfigInvalid(
                "thresholds.review must be greater than 0 (0 would refer every input)".into(),
            ));
        }
        if t.review > t.block {
            return Err(CoreError::ConfigInvalid(format!(
                "thresholds.review ({}) must not exceed thresholds.block ({})",
                t.review, t.block
            )));
        }
        for (channel, t) in &self.channel_thresholds {
            unit(&format!("channel_thresholds.{channel}.review"), t.review)?;
            unit(&format!("channel_thresholds.{channel}.block"), t.block)?;
            if t.review <= 0.0 || t.review > t.block {
                return Err(CoreError::ConfigInvalid(format!(
                    "channel_thresholds.{channel}: review ({}) must be greater than 0 and \
                     not exceed block ({})",
                    t.review, t.block
                )));
            }
        }
        self.floors.validate()?;
        let w = &self.severity_weights;
        unit("severity_weights.low", w.low)?;
        unit("severity_weights.medium", w.medium)?;
        unit("severity_weights.high", w.high)?;
        unit("severity_weights.critical", w.critical)?;
        unit("egress.result_weight", self.egress.result_weight)?;
        unit("lexical.weight", self.lexical.weight)?;
        unit("embedding.weight", self.embedding.weight)?;
        unit("embedding.gate", self.embedding.gate)?;
        if self.embedding.max_bytes < 1024 {
            return Err(CoreError::ConfigInvalid(format!(
                "embedding.max_bytes must be at least 1024, got {}",
                self.embedding.max_bytes
            )));
        }
        if !(1..=254).contains(&self.embedding.chunk_tokens) {
            return Err(CoreError::ConfigInvalid(format!(
                "embedding.chunk_tokens must be within 1..=254, got {}",
                self.embedding.chunk_tokens
            )));
        }
        self.review.validate()?;
        if !(self.egress.entropy_bits.is_finite() && self.egress.entropy_bits > 0.0) {
            return Err(CoreError::ConfigInvalid(
                "egress.entropy_bits must be a positive number".into(),
            ));
        }
        if self.egress.entropy_min_len == 0 {
            return Err(CoreError::ConfigInvalid(
                "egress.entropy_min_len must be at least 1".into(),
            ));
        }
        if self.egress.canaries.iter().any(|c| c.trim().len() < 8) {
            return Err(CoreError::ConfigInvalid(
                "egress.canaries: each canary must be at least 8 non-blank characters".into(),
            ));
        }
        for (i, a) in self.allow.iter().enumerate() {
            if a.rules.is_empty() {
                return Err(CoreError::ConfigInvalid(format!(
                    "allow[{i}] lists no rules"
                )));
            }
        }
        Ok(())
    }

    /// The thresholds in force on `channel`.
    pub fn thresholds_for(&self, channel: Channel) -> Thresholds {
        self.channel_thresholds
            .get(&channel)
            .copied()
            .unwrap_or(self.thresholds)
    }

    /// Canonical JSON: struct fields serialize in declaration order, so equal
    /// configurations give equal bytes.
    pub fn canonical_json(&self) -> String {
        // Serializing plain structs of numbers, strings and vectors cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// SHA-256 of the canonical JSON plus `extra` (e.g. the rule set fingerprint).
    pub fn hash_with(&self, extra: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.canonical_json().as_bytes());
        h.update([0u8]);
        h.update(extra.as_bytes());
        hex::encode(h.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_presets_parse_validate_and_name_themselves() {
        for p in [Preset::Strict, Preset::Balanced, Preset::Permissive] {
            let c = Config::preset(p);
            c.validate().unwrap();
            assert_eq!(c.preset, p);
        }
    }

    #[test]
    fn presets_are_ordered_by_strictness() {
        let s = Config::preset(Preset::Strict).thresholds;
        let b = Config::preset(Preset::Balanced).thresholds;
        let p = Config::preset(Preset::Permissive).thresholds;
        assert!(s.review < b.review && b.review < p.review);
        assert!(s.block < b.block && b.block < p.block);
        for c in [Preset::Strict, Preset::Balanced, Preset::Permissive] {
            Config::preset(c).validate().unwrap();
        }
    }

    #[test]
    fn file_overrides_preset_and_keeps_the_rest() {
        let cfg = Config::from_toml_str(
            "preset = \"strict\"\n[thresholds]\nreview = 0.2\nblock = 0.7\n[egress]\ncanaries = [\"PCY-CANARY-123456\"]\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(cfg.preset, Preset::Strict);
        assert_eq!(cfg.thresholds.review, 0.2);
        assert!(
            cfg.egress.mask_pii,
            "strict preset masks PII unless overridden"
        );
        assert_eq!(cfg.egress.canaries.len(), 1);
    }

    #[test]
    fn a_lexical_section_changes_only_the_keys_it_gives() {
        let preset = Config::default().lexical;
        assert!(preset.enabled);
        let cfg = Config::from_toml_str("[lexical]\nenabled = false\n", "t.toml").unwrap();
        assert!(!cfg.lexical.enabled);
        assert_eq!(cfg.lexical.weight, preset.weight);
        let cfg = Config::from_toml_str("[lexical]\nweight = 0.5\n", "t.toml").unwrap();
        assert!(cfg.lexical.enabled);
        assert_eq!(cfg.lexical.weight, 0.5);
        let e = Config::from_toml_str("[lexical]\nenabeld = false\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("enabeld"));
    }

    #[test]
    fn a_review_section_keeps_the_presets_band_and_other_keys() {
        let preset = Config::default().review;
        assert!(!preset.enabled && preset.band.is_some());
        let cfg = Config::from_toml_str(
            "[review]\nenabled = true\n[review.moves.deescalate]\nallowed = true\n",
            "t.toml",
        )
        .unwrap();
        assert!(cfg.review.enabled);
        assert_eq!(cfg.review.band, preset.band);
        assert!(cfg.review.moves.deescalate.allowed);
        assert_eq!(
            cfg.review.moves.deescalate.min_confidence,
            preset.moves.deescalate.min_confidence
        );
        assert_eq!(cfg.review.moves.escalate, preset.moves.escalate);
        let e = Config::from_toml_str("[review]\nenabeld = true\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("enabeld"));
        let e = Config::from_toml_str("[review]\nband = [0.9, 0.2]\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("band"));
    }

    #[test]
    fn channel_thresholds_apply_to_their_channel_and_a_files_own_thresholds_mean_all() {
        let cfg = Config::from_toml_str(
            "[channel_thresholds.tool_result]\nreview = 0.5\nblock = 0.6\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(cfg.thresholds_for(Channel::ToolResult).review, 0.5);
        assert_eq!(
            cfg.thresholds_for(Channel::UserPrompt),
            Config::default().thresholds_for(Channel::UserPrompt)
        );
        let cfg =
            Config::from_toml_str("[thresholds]\nreview = 0.2\nblock = 0.7\n", "t.toml").unwrap();
        for c in Channel::ALL {
            assert_eq!(cfg.thresholds_for(c).review, 0.2, "{c}");
        }
        let e = Config::from_toml_str(
            "[channel_thresholds.tool_result]\nreview = 0.9\nblock = 0.6\n",
            "t.toml",
        );
        assert!(e.unwrap_err().to_string().contains("tool_result"));
        let e = Config::from_toml_str(
            "[channel_thresholds.tool_reslt]\nreview = 0.5\nblock = 0.6\n",
            "t.toml",
        );
        assert!(e.unwrap_err().to_string().contains("tool_reslt"));
    }

    #[test]
    fn a_floors_section_changes_only_the_keys_it_gives_and_cannot_free_a_critical() {
        let cfg = Config::from_toml_str(
            "[floors]\nmedium = \"review\"\n[floors.categories]\npii = \"review\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(cfg.floors.medium, crate::Floor::Review);
        assert_eq!(cfg.floors.critical, crate::Floor::Block);
        assert_eq!(
            cfg.floors.categories.get("pii"),
            Some(&crate::Floor::Review)
        );
        assert_eq!(
            cfg.floors.categories.get("secret"),
            Some(&crate::Floor::Block),
            "the preset's categories are kept"
        );
        let e = Config::from_toml_str("[floors]\ncritical = \"none\"\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("critical"));
        let e = Config::from_toml_str("[floors]\nhigh = \"maybe\"\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("floors"));
    }

    #[test]
    fn every_shipped_preset_blocks_critical_and_holds_high_findings() {
        for p in [Preset::Strict, Preset::Balanced, Preset::Permissive] {
            let f = Config::preset(p).floors;
            assert_eq!(f.critical, crate::Floor::Block, "{p:?}");
            assert!(f.high >= crate::Floor::Review, "{p:?}");
        }
    }

    #[test]
    fn typos_and_bad_values_are_errors() {
        let e = Config::from_toml_str("[thresholds]\nreveiw = 0.2\nblock = 0.7\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("reveiw"));
        let e = Config::from_toml_str("[thresholds]\nreview = 0.9\nblock = 0.7\n", "t.toml");
        assert!(e.unwrap_err().to_string().contains("must not exceed"));
        let e = Config::from_toml_str("preset = \"lax\"\n", "t.toml");
        assert!(e.is_err());
        let e = Config::from_toml_str("[[allow]]\nrules = []\n", "t.toml");
        assert!(e.is_err());
    }

    #[test]
    fn hash_changes_with_any_setting() {
        let a = Config::default();
        let mut b = Config::default();
        assert_eq!(a.hash_with("r1"), b.hash_with("r1"));
        assert_ne!(a.hash_with("r1"), a.hash_with("r2"));
        b.thresholds.block = 0.81;
        assert_ne!(a.hash_with("r1"), b.hash_with("r1"));
    }

    #[test]
    fn allow_entry_matches_scope() {
        let a = AllowEntry {
            server: Some("fs".into()),
            tool: None,
            rules: vec!["au.x".into()],
        };
        assert!(a.covers(Some("fs"), Some("any"), "au.x"));
        assert!(!a.covers(Some("web"), Some("any"), "au.x"));
        assert!(!a.covers(Some("fs"), None, "au.y"));
    }
}
