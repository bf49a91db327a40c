//! The gateway reaches the structural controls through one interface:
//! `structural.rs` (`Structural` and the few types it re-exports). Besides it, only
//! `config.rs` (which embeds the controls' configuration tables) and `probe.rs`
//! (which builds the offline analysis's snapshots) may name `portcullis_controls`.

use std::path::Path;

const MAY_NAME_CONTROLS: &[&str] = &["structural.rs", "config.rs", "probe.rs"];

#[test]
fn only_the_structural_interface_names_the_controls_crate() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if !name.ends_with(".rs") {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(&path).expect("a source file is readable");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("portcullis_controls") && !MAY_NAME_CONTROLS.contains(&name.as_str()) {
                offenders.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        checked >= 10,
        "found only {checked} source files under {}",
        src.display()
    );
    assert!(
        offenders.is_empty(),
        "go through `crate::structural` instead:\n{}",
        offenders.join("\n")
    );
}
