//! Embeds every `rules/*.toml` of the repository into the binary, so that a new
//! rule category is one new file: no list to edit; the egress guard's formats
//! (`rules/egress/formats.toml`, checked here and turned into a Rust table); and the
//! trained lexical model.
use std::fmt::Write as _;
use std::path::PathBuf;

// The check and the generator of the formats table, shared with the crate's tests.
#[path = "src/guard/format_table.rs"]
mod format_table;

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
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out_dir.join("embedded_rules.rs"), src).expect("write embedded_rules.rs");

    let formats = manifest
        .join("../../rules/egress/formats.toml")
        .canonicalize()
        .expect("rules/egress/formats.toml exists");
    println!("cargo:rerun-if-changed={}", formats.display());
    let text = std::fs::read_to_string(&formats).expect("rules/egress/formats.toml is readable");
    let src = match format_table::rust_table(&text, &formats.display().to_string()) {
        Ok(src) => src,
        Err(e) => panic!("{e}"),
    };
    std::fs::write(out_dir.join("egress_formats.rs"), src).expect("write egress_formats.rs");

    // The trained lexical model, if one has been trained and committed. Without it
    // the stage cannot be enabled (start-up fails with the command that trains it).
    let model = manifest.join("data/lexical.json");
    println!("cargo:rerun-if-changed={}", model.display());
    let src = if model.exists() {
        let abs = model.canonicalize().expect("model path resolves");
        format!(
            "pub static EMBEDDED_LEXICAL: Option<&str> = Some(include_str!({:?}));\n",
            abs.display().to_string()
        )
    } else {
        "pub static EMBEDDED_LEXICAL: Option<&str> = None;\n".to_string()
    };
    std::fs::write(out_dir.join("embedded_lexical.rs"), src).expect("write embedded_lexical.rs");
}
