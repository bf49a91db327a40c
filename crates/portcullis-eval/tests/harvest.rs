//! The committed harvested corpus (corpus/harvest/): its files are the ones the
//! manifest hashes, every line is a valid harvested record, ids are unique (also
//! against the project's own corpus), no package of the real-server regression suite
//! is in it, and every package's items share one lineage group and so one split.
//! Needs no network: it reads only committed files.

use portcullis_eval::corpus::{self, Split};
use portcullis_eval::harvest;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load() -> Vec<harvest::Harvested> {
    let (recs, errors) = harvest::load_dir(&root().join("corpus/harvest")).unwrap();
    assert!(errors.is_empty(), "invalid harvested lines: {errors:#?}");
    recs
}

#[test]
fn the_manifest_hashes_the_committed_files() {
    let problems = harvest::check_manifest(&root().join("corpus/harvest")).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_harvested_line_is_a_valid_benign_record() {
    let recs = load();
    assert!(recs.len() >= 1000, "only {} harvested records", recs.len());
    let tools = recs
        .iter()
        .filter(|h| h.record.channel == portcullis_core::Channel::ToolDefinition)
        .count();
    assert!(tools >= 1000, "only {tools} harvested tool definitions");
}

#[test]
fn harvested_ids_are_unique_and_unlike_the_projects_own() {
    let recs = load();
    let (built, errors) = corpus::load_jsonl(&root().join("corpus/corpus.jsonl")).unwrap();
    assert!(errors.is_empty());
    let own: HashSet<&str> = built.iter().map(|r| r.id.as_str()).collect();
    let own_groups: HashSet<&str> = built.iter().map(|r| r.lineage_group.as_str()).collect();
    let mut seen = HashSet::new();
    for h in &recs {
        assert!(
            seen.insert(h.record.id.as_str()),
            "duplicate id {}",
            h.record.id
        );
        assert!(
            !own.contains(h.record.id.as_str()),
            "id {} is also in corpus.jsonl",
            h.record.id
        );
        assert!(
            !own_groups.contains(h.record.lineage_group.as_str()),
            "lineage group {} is also in corpus.jsonl",
            h.record.lineage_group
        );
    }
}

#[test]
fn no_package_of_the_real_server_suite_is_harvested() {
    let servers = std::fs::read_to_string(root().join("tests/real_servers/servers.py")).unwrap();
    let suite: HashSet<String> = harvest::suite_packages(&servers)
        .into_iter()
        .map(|(e, p)| format!("{e}:{}", harvest::normalize(&e, &p)))
        .collect();
    assert_eq!(suite.len(), 31, "the suite parser found {suite:?}");
    let norm = |group: &str| {
        let (e, p) = group.split_once(':').unwrap();
        format!("{e}:{}", harvest::normalize(e, p))
    };
    for h in load() {
        assert!(
            !suite.contains(&norm(&h.record.lineage_group)),
            "{} is a suite package",
            h.record.source
        );
    }
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("corpus/harvest/MANIFEST.json")).unwrap(),
    )
    .unwrap();
    for p in manifest["packages"].as_array().unwrap() {
        let key = format!(
            "{}:{}",
            p["ecosystem"].as_str().unwrap(),
            p["package"].as_str().unwrap()
        );
        assert!(
            !suite.contains(&norm(&key)),
            "{key} (suite package) in the manifest"
        );
    }
}

#[test]
fn a_package_never_spans_two_splits() {
    let mut split_of: BTreeMap<String, Split> = BTreeMap::new();
    let mut group_of_source: BTreeMap<String, String> = BTreeMap::new();
    let mut split_of_upstream: BTreeMap<String, Split> = BTreeMap::new();
    for h in load() {
        let r = &h.record;
        let s = r.split.expect("the loader assigns a split");
        assert_eq!(
            *split_of.entry(r.lineage_group.clone()).or_insert(s),
            s,
            "{} spans splits",
            r.lineage_group
        );
        // One version per package. A real tool result's source is the server and its
        // lineage group the data package the server worked on.
        if r.source.starts_with(&format!("{}@", r.lineage_group)) {
            let g = group_of_source
                .entry(r.lineage_group.clone())
                .or_insert(r.source.clone());
            assert_eq!(*g, r.source, "{} has two versions", r.lineage_group);
        }
        // Packages of one upstream (Debian's python3-x and PyPI's x) share a split.
        let u = harvest::upstream(&r.lineage_group);
        assert_eq!(
            *split_of_upstream.entry(u.clone()).or_insert(s),
            s,
            "upstream {u} spans splits"
        );
    }
    assert!(split_of.len() >= 100, "only {} packages", split_of.len());
    // The hash split gives every split some packages.
    for s in [Split::Train, Split::Dev, Split::Test] {
        assert!(split_of.values().any(|v| *v == s), "no package in {s:?}");
    }
}

#[test]
fn upstream_folds_packagings_of_one_project() {
    for (a, b) in [
        ("deb:python3-django", "pypi:Django"),
        ("deb:python3-requests", "pypi:requests"),
        ("deb:sphinx-doc", "pypi:sphinx"),
        ("deb:node-semver", "npm:semver"),
        ("deb:ansible-core", "pypi:ansible_core"),
    ] {
        assert_eq!(harvest::upstream(a), harvest::upstream(b), "{a} / {b}");
    }
    assert_ne!(
        harvest::upstream("pypi:flask"),
        harvest::upstream("pypi:django")
    );
    assert_ne!(
        harvest::upstream("npm:@a/mcp"),
        harvest::upstream("npm:@b/mcp")
    );
    // An affix alone is a name, not an affix.
    assert_eq!(harvest::upstream("deb:lib"), "lib");
}

#[test]
fn the_manifest_counts_each_text_files_splits() {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("corpus/harvest/MANIFEST.json")).unwrap(),
    )
    .unwrap();
    let mut counted: BTreeMap<(String, String), u64> = BTreeMap::new();
    for h in load() {
        let file = match h.record.id.split_once('-') {
            Some(("harvest_result", _)) => "results",
            Some(("harvest_text", _)) => "texts",
            _ => continue,
        };
        let s = h.record.split.unwrap().as_str().to_string();
        *counted.entry((file.to_string(), s)).or_default() += 1;
    }
    for file in ["texts", "results"] {
        let entry = &manifest["files"][format!("{file}.jsonl.gz")];
        if entry.is_null() {
            continue;
        }
        for s in ["train", "dev", "test"] {
            assert_eq!(
                entry["splits"][s].as_u64(),
                counted.get(&(file.to_string(), s.to_string())).copied(),
                "{file}.jsonl.gz {s} (scripts/harvest/sync_splits.py)"
            );
        }
    }
}

#[test]
fn the_loader_refuses_what_the_schema_does_not_allow() {
    let ok = r#"{"id":"harvest_prompt-00001","text":"Summarize a file","label":"benign","channel":"prompt","category":"benign","register":"plain","language":"en","provenance":"harvested","parent_id":null,"lineage_group":"npm:@x/y","source":"npm:@x/y@1.0.0","origin":"prompts/list[0] summarize"}"#;
    let (good, bad) = harvest::parse(ok, "t", &[portcullis_core::Channel::Prompt]);
    assert_eq!((good.len(), bad.len()), (1, 0), "{bad:?}");
    for (from, to) in [
        (
            r#""lineage_group":"npm:@x/y""#,
            r#""lineage_group":"npm:@x/z""#,
        ),
        (r#""label":"benign""#, r#""label":"malicious""#),
        (r#""provenance":"harvested""#, r#""provenance":"original""#),
        (
            r#""source":"npm:@x/y@1.0.0""#,
            r#""source":"cargo:y@1.0.0""#,
        ),
        (
            r#""origin":"prompts/list[0] summarize""#,
            r#""origin":"x","extra":1"#,
        ),
        (r#""channel":"prompt""#, r#""channel":"resource""#),
    ] {
        let line = ok.replace(from, to);
        let (good, bad) = harvest::parse(&line, "t", &[portcullis_core::Channel::Prompt]);
        assert!(good.is_empty() && bad.len() == 1, "accepted: {line}");
    }
    let tool = r#"{"id":"harvest_tool_definition-00001","tool":{"name":"t","description":"d"},"label":"benign","channel":"tool_definition","category":"benign","register":"plain","language":"en","poison_location":"none","provenance":"harvested","parent_id":null,"lineage_group":"pypi:p","source":"pypi:p@1","origin":"tools/list[0] t"}"#;
    let (good, bad) = harvest::parse(tool, "t", &[portcullis_core::Channel::ToolDefinition]);
    assert!(
        good.is_empty() && bad.len() == 1,
        "a tool without inputSchema was accepted"
    );
    let tool = tool.replace(
        r#""description":"d""#,
        r#""description":"d","inputSchema":{"type":"object"}"#,
    );
    let (good, bad) = harvest::parse(&tool, "t", &[portcullis_core::Channel::ToolDefinition]);
    assert_eq!((good.len(), bad.len()), (1, 0), "{bad:?}");
}

#[test]
fn the_manifest_splits_are_the_builders() {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("corpus/harvest/MANIFEST.json")).unwrap(),
    )
    .unwrap();
    let loaded: BTreeMap<String, Split> = load()
        .into_iter()
        .map(|h| (h.record.lineage_group, h.record.split.unwrap()))
        .collect();
    for p in manifest["packages"].as_array().unwrap() {
        if p["status"] != "listed" {
            continue;
        }
        let group = format!(
            "{}:{}",
            p["ecosystem"].as_str().unwrap(),
            p["package"].as_str().unwrap()
        );
        assert_eq!(
            p["split"].as_str(),
            // A listed package whose items were all duplicates has no records.
            Some(
                loaded
                    .get(&group)
                    .copied()
                    .unwrap_or_else(|| corpus::split_of(&group))
                    .as_str()
            ),
            "{group}: the manifest's split is not the loader's (scripts/harvest/sync_splits.py)"
        );
    }
}

/// `crates/portcullis-controls/data/common_names.txt` (the names real software
/// shares, which the taint control does not label in results) is what
/// `scripts/harvest/common_names.py` makes of the committed harvest: its header
/// hashes the files the manifest hashes and the committed top-level domains, and
/// the rule, run again here on the loaded records (the loader's splits), lists
/// exactly its names.
#[test]
fn common_names_are_the_rule_run_on_the_committed_harvest() {
    use regex::Regex;
    let list =
        std::fs::read_to_string(root().join("crates/portcullis-controls/data/common_names.txt"))
            .unwrap();
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("corpus/harvest/MANIFEST.json")).unwrap(),
    )
    .unwrap();
    let hashed: Vec<(&str, &str)> = list
        .lines()
        .filter_map(|l| l.strip_prefix("# sha256 "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let files = [
        "texts.jsonl.gz",
        "texts-assistants.jsonl.gz",
        "results.jsonl.gz",
    ];
    assert_eq!(
        hashed.iter().map(|h| h.0).collect::<Vec<_>>(),
        [&files[..], &["psl-tlds.txt"]].concat()
    );
    for (file, hash) in &hashed[..files.len()] {
        assert_eq!(
            manifest["files"][*file]["sha256"].as_str(),
            Some(*hash),
            "{file}"
        );
    }
    // The top-level domains of the Public Suffix List the list was made with
    // (committed: a machine's own list changes with its updates).
    let tlds_file = std::fs::read(root().join("scripts/harvest/psl-tlds.txt")).unwrap();
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&tlds_file)),
        hashed[files.len()].1,
        "scripts/harvest/psl-tlds.txt changed: rerun scripts/harvest/common_names.py"
    );
    let tlds: HashSet<String> = String::from_utf8_lossy(&tlds_file)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
        .map(str::to_string)
        .collect();
    assert!(tlds.len() > 1000 && tlds.contains("com") && tlds.contains("md"));
    // harvest::upstream, with a translation's language suffix folded too.
    let language = Regex::new(r"-[a-z]{2}(?:-[a-z]{2,4})?$").unwrap();
    let upstream = |group: &str| {
        let n = harvest::upstream(group);
        if !group.starts_with("deb:") {
            return n;
        }
        let folded = language.replace(&n, "").into_owned();
        if folded.is_empty() {
            n
        } else {
            folded
        }
    };
    let ws = "\t\n\x0B\x0C\r \u{85}\u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}";
    let sep = Regex::new(&format!("[{ws}\"'`,;()\\[\\]{{}}<>|]+")).unwrap();
    // The value shape of `taint::value_like` without a digit, in printable ASCII
    // without `/`, `\`, or `@` but at the start (the script's `names`).
    let listable = |t: &str| {
        t.len() >= 8
            && t.bytes()
                .all(|b| (b'!'..=b'~').contains(&b) && !b.is_ascii_digit() && !b"/\\".contains(&b))
            && !t.bytes().skip(1).any(|b| b == b'@')
            && t.bytes().filter(u8::is_ascii_alphanumeric).count() >= 8
            && (t.len() >= 24 || t.bytes().any(|b| b".@:=+".contains(&b)))
    };
    let host = Regex::new(&format!(
        "(?:://(?:[^/{ws}@]*@)?|[A-Za-z0-9._%+-]@)([A-Za-z0-9.-]+\\.[A-Za-z]{{2,}})"
    ))
    .unwrap();
    let mut groups: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    let mut hosts: HashSet<String> = HashSet::new();
    for h in load() {
        let r = h.record;
        if !r.id.starts_with("harvest_text") && !r.id.starts_with("harvest_result") {
            continue;
        }
        if r.split == Some(Split::Test) {
            continue;
        }
        let text = r.text.as_deref().unwrap_or_default();
        let up = upstream(&r.lineage_group);
        for tok in sep.split(text) {
            let tok = tok.trim_matches(|c: char| matches!(c, '.' | ':' | '!' | '?'));
            if listable(tok) {
                if let Some(g) = groups.get_mut(tok) {
                    g.insert(up.clone());
                } else {
                    groups.insert(tok.to_string(), HashSet::from([up.clone()]));
                }
            }
        }
        for c in host.captures_iter(text) {
            hosts.insert(c[1].to_ascii_lowercase());
        }
    }
    let want: HashSet<&str> = groups
        .iter()
        .filter(|(t, g)| {
            g.len() >= 3
                && !hosts.contains(&t.to_ascii_lowercase())
                && !t
                    .rsplit_once('.')
                    .is_some_and(|(_, tld)| tlds.contains(&tld.to_ascii_lowercase()))
                // `@name` and `#name` without a `.` are handles and channels.
                && (!t.starts_with(['@', '#']) || t.contains('.'))
        })
        .map(|(t, _)| t.as_str())
        .collect();
    let have: HashSet<&str> = list.lines().filter(|l| !l.starts_with("# ")).collect();
    assert!(have.len() > 1000, "only {} names", have.len());
    let missing: Vec<_> = want.difference(&have).take(10).collect();
    let extra: Vec<_> = have.difference(&want).take(10).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "rerun scripts/harvest/common_names.py: missing {missing:?}, not by the rule {extra:?}"
    );
}
