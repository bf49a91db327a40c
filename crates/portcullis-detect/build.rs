//! Embeds every `rules/*.toml` of the repository into the binary, so that a new
//! rule category is one new file: no list to edit.
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rules_dir = manifest.join("../../rules");
    println!("cargo:rerun-if-changed={}", rules_dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&rules_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut src = String::from("/// Rule files embedded at build time: (file name, contents).\npub static EMBEDDED_RULES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let abs = f.canonicalize().expect("rule file path resolves");
        writeln!(
            src,
            "    ({name:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .expect("write to String");
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("embedded_rules.rs");
    std::fs::write(out, src).expect("write embedded_rules.rs");
}
