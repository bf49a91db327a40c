//! The committed corpus: its build is reproducible, its splits respect lineage,
//! its generators are label-neutral, it meets the size and coverage requirements,
//! and its rules-blind split shares no trigger vocabulary with the rules.

use portcullis_core::Channel;
use portcullis_eval::corpus::{self, Label, Provenance, Record, Split};
use portcullis_eval::train::fires_any_rule;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load_dir(dir: &str) -> Vec<Record> {
    let mut out = Vec::new();
    for f in corpus::jsonl_files(&root().join(dir)).unwrap() {
        let (records, errors) = corpus::load_jsonl(&f).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        out.extend(records);
    }
    out
}

fn built() -> Vec<Record> {
    let (records, errors) = corpus::load_jsonl(&root().join("corpus/corpus.jsonl")).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    records
}

/// The full corpus (corpus/SCHEMA.md "The full corpus"): the committed corpus's
/// sources plus the harvest and the payloads placed into it, built in-process once
/// per test binary; too big to commit, so its SHA-256 is pinned in corpus/full.sha256.
fn full() -> &'static (Vec<Record>, String) {
    static FULL: std::sync::OnceLock<(Vec<Record>, String)> = std::sync::OnceLock::new();
    FULL.get_or_init(|| {
        let rules = portcullis_detect::rules::RuleSet::embedded().unwrap();
        let fires = |r: &Record| fires_any_rule(&rules, r);
        let dir = root().join("corpus/harvest");
        assert!(portcullis_eval::harvest::check_manifest(&dir)
            .unwrap()
            .is_empty());
        let (harvested, errors) = portcullis_eval::harvest::load_dir(&dir).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let (payloads, errors) =
            portcullis_eval::payloads::load_dir(&root().join("corpus/payloads")).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let records = corpus::build(
            load_dir("corpus/base"),
            load_dir("corpus/rules_blind"),
            harvested
                .into_iter()
                .map(portcullis_eval::harvest::Harvested::into_record)
                .collect(),
            &payloads,
            &fires,
        )
        .unwrap();
        let sha = corpus::corpus_sha256(corpus::to_jsonl(&records).as_bytes());
        (records, sha)
    })
}

fn pinned_full_sha256() -> String {
    std::fs::read_to_string(root().join("corpus/full.sha256"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn the_full_corpus_build_is_the_pinned_one() {
    assert_eq!(
        full().1,
        pinned_full_sha256(),
        "the full corpus's sources changed: rebuild it, retrain and recalibrate (`make model`), \
         then write its sha256 into corpus/full.sha256"
    );
    let records = &full().0;
    assert!(records.len() > 90_000, "{} records", records.len());
}

#[test]
fn the_committed_corpus_is_what_the_build_produces() {
    let rules = portcullis_detect::rules::RuleSet::embedded().unwrap();
    let fires = |r: &Record| fires_any_rule(&rules, r);
    let rebuilt = corpus::build(
        load_dir("corpus/base"),
        load_dir("corpus/rules_blind"),
        Vec::new(),
        &[],
        &fires,
    )
    .unwrap();
    let committed = std::fs::read_to_string(root().join("corpus/corpus.jsonl")).unwrap();
    assert!(
        corpus::to_jsonl(&rebuilt) == committed,
        "corpus/corpus.jsonl is stale: run `portcullis corpus build`"
    );
}

#[test]
fn no_rules_blind_record_fires_any_rule() {
    let rules = portcullis_detect::rules::RuleSet::embedded().unwrap();
    let blind: Vec<Record> = built()
        .into_iter()
        .filter(|r| r.split == Some(Split::RulesBlind))
        .collect();
    assert!(
        blind.len() >= 300,
        "rules-blind split has {} records",
        blind.len()
    );
    let firing: Vec<&str> = blind
        .iter()
        .filter(|r| fires_any_rule(&rules, r))
        .map(|r| r.id.as_str())
        .collect();
    assert!(
        firing.is_empty(),
        "rules fire on rules-blind records: {firing:?}"
    );
}

#[test]
fn splits_follow_lineage_groups() {
    let mut split_of: HashMap<String, Split> = HashMap::new();
    for r in built() {
        let s = r.split.expect("every built record has a split");
        if let Some(prev) = split_of.insert(r.lineage_group.clone(), s) {
            assert_eq!(
                prev, s,
                "lineage group {} spans two splits",
                r.lineage_group
            );
        }
    }
}

#[test]
fn generators_are_label_neutral() {
    let records = built();
    let mut seen: BTreeMap<(String, Label), usize> = BTreeMap::new();
    for r in &records {
        if let Some(w) = r.wrapper.as_ref().or(r.transform.as_ref()) {
            *seen.entry((w.clone(), r.label)).or_default() += 1;
            let parent = records
                .iter()
                .find(|p| Some(&p.id) == r.parent_id.as_ref())
                .expect("parent exists");
            assert_eq!(parent.label, r.label, "a generator never changes a label");
        }
    }
    let names: BTreeSet<&String> = seen.keys().map(|k| &k.0).collect();
    for n in names {
        for l in [Label::Benign, Label::Malicious] {
            assert!(
                seen.get(&(n.clone(), l)).copied().unwrap_or(0) > 0,
                "{n} never applied to {l:?}"
            );
        }
    }
}

#[test]
fn the_corpus_meets_its_size_and_coverage_requirements() {
    let records = built();
    let originals: Vec<&Record> = records
        .iter()
        .filter(|r| r.provenance == Provenance::Original)
        .collect();
    assert!(records.len() >= 4000, "{} records", records.len());
    assert!(
        originals.len() >= 2000,
        "{} individually written",
        originals.len()
    );
    let benign = records.iter().filter(|r| r.label == Label::Benign).count();
    assert!(
        benign * 100 >= records.len() * 40,
        "{benign} benign of {}",
        records.len()
    );
    let hard = records.iter().filter(|r| r.is_hard_negative()).count();
    assert!(hard >= 800, "{hard} hard negatives");
    let tools = originals
        .iter()
        .filter(|r| r.channel == Channel::ToolDefinition)
        .count();
    assert!(tools >= 600, "{tools} tool definitions");
    let schema_only = originals
        .iter()
        .filter(|r| r.poison_location.as_deref() == Some("schema"))
        .count();
    assert!(
        schema_only >= 60,
        "{schema_only} schema-only poisoned tools"
    );
    // Outbound-only channels (the client's answers to a server) are read by the
    // egress guard alone; no detector is trained or evaluated on them.
    for c in Channel::ALL
        .into_iter()
        .filter(|c| *c != Channel::ToolDefinition && !c.is_outbound_only())
    {
        let distinct: BTreeSet<&str> = originals
            .iter()
            .filter(|r| r.channel == c)
            .filter_map(|r| r.text.as_deref())
            .collect();
        assert!(
            distinct.len() >= 300,
            "{c}: {} distinct standalone texts",
            distinct.len()
        );
    }
    let languages: BTreeSet<&str> = records.iter().map(|r| r.language.as_str()).collect();
    assert!(languages.len() >= 7, "{languages:?}");
}

#[test]
fn the_committed_lexical_model_is_reproduced_by_training_on_the_full_corpus() {
    use portcullis_detect::lexical::{LexicalModel, TrainParams};
    let (records, sha) = full();
    let committed =
        std::fs::read_to_string(root().join("crates/portcullis-detect/data/lexical.json")).unwrap();
    let model = LexicalModel::from_json(&committed).unwrap();
    assert_eq!(
        &model.provenance.corpus_sha256, sha,
        "the model was trained on another corpus: retrain (`make model`)"
    );
    let params = TrainParams {
        ..model.params.clone()
    };
    let retrained = portcullis_eval::train::train_lexical(records, sha, &params);
    assert!(
        retrained.to_json() == committed,
        "training is not reproducible, or the model file is stale"
    );
}

#[test]
fn the_presets_were_calibrated_on_the_full_corpus_dev_split() {
    let sha = pinned_full_sha256();
    for p in ["strict", "balanced", "permissive"] {
        let text = std::fs::read_to_string(root().join(format!("presets/{p}.toml"))).unwrap();
        assert!(
            text.contains(&format!("# corpus_sha256 = {sha}")),
            "presets/{p}.toml was fitted on another corpus"
        );
        assert!(text.contains("# split = dev"), "presets/{p}.toml");
    }
}

/// The registers of payload brief 4 (`corpus/payloads-next/BRIEF.md`).
const BRIEF4_REGISTERS: &[&str] = &[
    "terse",
    "conversational",
    "code_comment",
    "config_comment",
    "html_comment",
    "html_hidden",
    "json_field",
    "yaml_field",
    "csv_row",
    "markdown_table",
    "markdown_footnote",
    "log_lines",
    "stack_trace_or_error",
    "email",
    "ticket_or_issue",
    "commit_message",
    "changelog_or_release_note",
    "fake_tool_output",
    "fake_user_turn",
    "impersonated_system",
    "formal_notice",
    "legal_or_policy",
    "multi_step",
    "few_shot",
    "encoded",
    "translation_mix",
    "schema_key_or_enum",
    "sql_comment",
    "docstring",
    "chat_transcript",
    "calendar_invite",
    "spreadsheet_note",
    "api_doc",
    "readme_section",
];

/// `corpus/payloads-next/` (written from payload brief 4, not yet in the build):
/// every line well formed, numbered, new (no text of `corpus/payloads/` again) and
/// of the brief's registers and categories; the counts its README states.
#[test]
fn staged_payloads_are_well_formed_and_new() {
    use portcullis_eval::corpus::{is_malicious_category, HARD_NEGATIVE_KINDS};
    let brief = std::fs::read_to_string(root().join("corpus/payloads-next/BRIEF.md")).unwrap();
    let keys = [
        "id",
        "text",
        "label",
        "category",
        "register",
        "language",
        "trigger_words",
        "fits",
        "goal",
    ];
    let known: std::collections::HashSet<String> =
        portcullis_eval::payloads::load_dir(&root().join("corpus/payloads"))
            .unwrap()
            .0
            .into_iter()
            .map(|p| p.text)
            .collect();
    let category_ok = |c: &str, malicious: bool| {
        if malicious {
            is_malicious_category(c)
        } else {
            c.strip_prefix("hard_negative:")
                .is_some_and(|k| HARD_NEGATIVE_KINDS.contains(&k))
        }
    };
    let mut texts = HashSet::new();
    let (mut malicious, mut languages, mut registers) = (0, BTreeSet::new(), BTreeSet::new());
    let files = corpus::jsonl_files(&root().join("corpus/payloads-next")).unwrap();
    assert_eq!(files.len(), 8, "{files:?}");
    for f in &files {
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap().to_string();
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let at = format!("{}:{}", f.display(), i + 1);
            let v: serde_json::Value = serde_json::from_str(line).expect(&at);
            let o = v.as_object().expect(&at);
            assert_eq!(
                o.keys().map(String::as_str).collect::<Vec<_>>(),
                keys,
                "{at}"
            );
            assert_eq!(o["id"], format!("{stem}-{:05}", i + 1), "{at}");
            let text = o["text"].as_str().expect(&at);
            assert!(
                !text.trim().is_empty() && texts.insert(text.to_string()),
                "{at}: empty or repeated"
            );
            assert!(!known.contains(text), "{at}: already in corpus/payloads");
            let is_malicious = match o["label"].as_str() {
                Some("malicious") => true,
                Some("benign") => false,
                other => panic!("{at}: label {other:?}"),
            };
            malicious += usize::from(is_malicious);
            let category = o["category"].as_str().expect(&at);
            assert!(
                category_ok(category, is_malicious),
                "{at}: category {category:?}"
            );
            let register = o["register"].as_str().expect(&at);
            assert!(
                BRIEF4_REGISTERS.contains(&register) && brief.contains(register),
                "{at}: register {register:?} is not the brief's"
            );
            registers.insert(register.to_string());
            let lang = o["language"].as_str().expect(&at);
            assert!(
                lang.len() == 2 && lang.bytes().all(|b| b.is_ascii_lowercase()),
                "{at}"
            );
            languages.insert(lang.to_string());
            assert!(o["trigger_words"].is_boolean(), "{at}");
            let fits = o["fits"].as_array().expect(&at);
            assert!(!fits.is_empty(), "{at}");
            for fit in fits {
                assert!(
                    [
                        "description",
                        "schema_field",
                        "result",
                        "resource",
                        "prompt"
                    ]
                    .contains(&fit.as_str().unwrap_or_default()),
                    "{at}: fits {fit}"
                );
            }
            assert_eq!(o["goal"] == "none", !is_malicious, "{at}: goal");
        }
    }
    assert!(malicious >= 6000, "{malicious} malicious");
    assert!(
        languages.len() >= 20 && registers.len() >= 30,
        "{languages:?} {registers:?}"
    );
}

/// A mix of malicious categories (payload brief 4 allows `PI-UI`,
/// `exfiltration-concealment`) is a category when every part is one.
#[test]
fn a_mix_of_malicious_categories_is_one() {
    use portcullis_eval::corpus::is_malicious_category;
    for ok in [
        "PI",
        "PI-UI",
        "exfiltration-concealment",
        "RI-exfiltration-concealment",
    ] {
        assert!(is_malicious_category(ok), "{ok}");
    }
    for bad in [
        "PI-",
        "-PI",
        "benign",
        "PI-foo",
        "",
        "hard_negative:security_docs",
    ] {
        assert!(!is_malicious_category(bad), "{bad}");
    }
}
