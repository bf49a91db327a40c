//! The ONNX Runtime library is loaded once per process, whoever asks first: models
//! loaded at the same moment from several threads all load (this file is its own
//! test process, so the first load is one of these). Needs `scripts/fetch-models.sh`.

use portcullis_embed::{resolve_models_dir, Backend, Embedder};

#[test]
fn models_loaded_at_once_from_several_threads_all_load() {
    let dir = resolve_models_dir(portcullis_embed::DEFAULT_MODELS_DIR);
    let start = std::sync::Barrier::new(4);
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    Embedder::load(&dir, &Backend::default_onnx())
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    for r in results {
        if let Err(e) = r {
            panic!("{e}");
        }
    }
}
