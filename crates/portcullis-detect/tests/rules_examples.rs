//! Every rule carries its own test table: positives it must fire on, and hard
//! negatives (benign text sharing its words) on which NO rule may fire.

use portcullis_core::Config;
use portcullis_detect::normalize::{normalize, TextKind};
use portcullis_detect::rules::{RuleSet, Scope, Target};

fn target_of(scope: Scope) -> (TextKind, Target) {
    match scope {
        Scope::Text => (TextKind::Prose, Target::Text),
        Scope::PropertyName => (TextKind::Identifier, Target::PropertyName),
        Scope::ToolName => (TextKind::Identifier, Target::ToolName),
    }
}

#[test]
fn embedded_rules_load_and_cover_the_required_categories() {
    let rules = RuleSet::embedded().expect("embedded rules compile");
    let cats: Vec<&str> = rules.categories().iter().map(|c| c.name.as_str()).collect();
    for required in [
        "instruction_override",
        "authority_urgency",
        "concealment",
        "tool_redirection",
        "exfiltration",
        "credential_request",
        "impersonation",
        "fake_error",
        "preference_manipulation",
        "hidden_markup",
        "parameter_names",
    ] {
        assert!(
            cats.contains(&required),
            "missing rule category {required}: have {cats:?}"
        );
    }
    // Each category file's name is its category: one file per category.
    for c in rules.categories() {
        assert_eq!(c.file, format!("{}.toml", c.name));
    }
}

#[test]
fn every_rule_has_examples_and_fires_on_its_positives() {
    let rules = RuleSet::embedded().unwrap();
    let caps = Config::default().normalize;
    let mut failures = Vec::new();
    for (ri, rule) in rules.rules().iter().enumerate() {
        if rule.positive.is_empty() || rule.negative.is_empty() {
            failures.push(format!(
                "{}: needs at least one positive and one negative example",
                rule.id
            ));
        }
        let (kind, target) = target_of(rule.scope);
        for text in &rule.positive {
            let n = normalize(text, kind, &caps);
            let hits = rules.scan(&n.views, target);
            if !hits.iter().any(|h| h.rule == ri) {
                failures.push(format!(
                    "{}: does not fire on its positive {text:?}",
                    rule.id
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn no_rule_fires_on_any_hard_negative() {
    let rules = RuleSet::embedded().unwrap();
    let caps = Config::default().normalize;
    let mut failures = Vec::new();
    for rule in rules.rules() {
        let (kind, target) = target_of(rule.scope);
        for text in &rule.negative {
            let n = normalize(text, kind, &caps);
            for h in rules.scan(&n.views, target) {
                failures.push(format!(
                    "negative of {} {text:?} fires {} on view {}",
                    rule.id,
                    rules.rules()[h.rule].id,
                    n.views[h.view].name
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The prefilter may let through a pattern that does not match, never drop one
/// that does: on every view of every example, alone and all together (so common
/// literals come again and again), each pattern whose own regex matches is a
/// candidate.
#[test]
fn the_prefilter_keeps_every_pattern_that_matches() {
    let rules = RuleSet::embedded().unwrap();
    let caps = Config::default().normalize;
    let regexes: Vec<regex::Regex> = (0..rules.pattern_count())
        .map(|pi| regex::Regex::new(rules.pattern_source(pi).0).expect("a rule's pattern"))
        .collect();
    let examples: Vec<&String> = rules
        .rules()
        .iter()
        .flat_map(|r| r.positive.iter().chain(&r.negative))
        .collect();
    let together = examples
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut matched = 0;
    let mut dropped = Vec::new();
    for text in examples
        .iter()
        .map(|t| t.as_str())
        .chain([together.as_str()])
    {
        for kind in [TextKind::Prose, TextKind::Identifier] {
            for view in normalize(text, kind, &caps).views {
                let candidates = rules.candidate_patterns(&view.text);
                for (pi, regex) in regexes.iter().enumerate() {
                    if regex.is_match(&view.text) {
                        matched += 1;
                        if candidates.binary_search(&pi).is_err() {
                            dropped.push(format!(
                                "{} ({}) on view {} of {text:?}",
                                rules.pattern_source(pi).1,
                                rules.pattern_source(pi).0,
                                view.name
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        matched > 1000,
        "only {matched} matches: the check saw too few"
    );
    assert!(
        dropped.is_empty(),
        "{} matching patterns dropped by the prefilter:\n{}",
        dropped.len(),
        dropped.join("\n")
    );
}

#[test]
fn rule_spans_point_at_the_original_text() {
    let rules = RuleSet::embedded().unwrap();
    let caps = Config::default().normalize;
    for (ri, rule) in rules.rules().iter().enumerate() {
        let (kind, target) = target_of(rule.scope);
        for text in &rule.positive {
            let n = normalize(text, kind, &caps);
            for h in rules
                .scan(&n.views, target)
                .into_iter()
                .filter(|h| h.rule == ri)
            {
                assert!(
                    h.span.start <= h.span.end && h.span.end <= text.len(),
                    "{}: {:?}",
                    rule.id,
                    h.span
                );
                assert!(text.is_char_boundary(h.span.start) && text.is_char_boundary(h.span.end));
            }
        }
    }
}

#[test]
fn broken_rule_files_are_clear_errors() {
    let bad_pattern = "category = \"x\"\nversion = 1\ndescription = \"d\"\n[[rule]]\nid = \"x.a\"\nseverity = \"high\"\ndescription = \"d\"\npatterns = ['(unclosed']\n";
    let e = RuleSet::from_sources(&[("x.toml".into(), bad_pattern.into())], "test").unwrap_err();
    assert!(e.to_string().contains("x.a"), "{e}");
    let typo = "category = \"x\"\nversion = 1\ndescription = \"d\"\n[[rule]]\nid = \"x.a\"\nseverity = \"hihg\"\ndescription = \"d\"\npatterns = ['a']\n";
    assert!(RuleSet::from_sources(&[("x.toml".into(), typo.into())], "test").is_err());
    let dup = "category = \"x\"\nversion = 1\ndescription = \"d\"\n[[rule]]\nid = \"x.a\"\nseverity = \"low\"\ndescription = \"d\"\npatterns = ['a']\n[[rule]]\nid = \"x.a\"\nseverity = \"low\"\ndescription = \"d\"\npatterns = ['b']\n";
    assert!(RuleSet::from_sources(&[("x.toml".into(), dup.into())], "test").is_err());
    assert!(RuleSet::from_sources(&[], "empty").is_err());
}
