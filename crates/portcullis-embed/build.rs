//! Embeds the trained classifier head and nearest-neighbour index, if they have
//! been trained and committed (`portcullis train-embedding` writes them to data/).
//! Without them the stage cannot be enabled unless a configuration names files.
use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut src = String::new();
    for (name, file, kind, ty) in [
        (
            "EMBEDDED_HEAD",
            "data/embedding-head.json",
            "include_str",
            "&str",
        ),
        (
            "EMBEDDED_INDEX",
            "data/embedding-knn.bin",
            "include_bytes",
            "&[u8]",
        ),
    ] {
        let path = manifest.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        if path.exists() {
            let abs = path.canonicalize().expect("data path resolves");
            src.push_str(&format!(
                "pub static {name}: Option<{ty}> = Some({kind}!({:?}));\n",
                abs.display().to_string()
            ));
        } else {
            src.push_str(&format!("pub static {name}: Option<{ty}> = None;\n"));
        }
    }
    std::fs::write(out_dir.join("embedded_head.rs"), src).expect("write embedded_head.rs");
}
