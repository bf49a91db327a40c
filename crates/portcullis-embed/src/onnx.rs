//! The ONNX Runtime backend: `model.onnx` (written from the same safetensors by
//! `scripts/export-onnx.py`, mean pooling and normalization inside the graph) run
//! by the ONNX Runtime library that `scripts/fetch-models.sh` takes from the
//! `onnxruntime` PyPI wheel, loaded at run time (`ort`'s `load-dynamic`): no
//! download and no C build at compile time.
//!
//! Why this backend is the default: on the 2-core machine this project is measured
//! on, candle's BERT ran at about 0.6x sentence-transformers' (PyTorch) throughput
//! on 128-token texts; ONNX Runtime's fused kernels run well above 1x
//! (`reports/embedding-bench.md`).

use crate::error::EmbedError;
use crate::model::{Encoder, Padded, DIM};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::TensorRef;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The graph file in the models directory.
pub const MODEL_FILE: &str = "model.onnx";

/// The runtime library a process loaded first; `ort` loads one per process.
static RUNTIME: OnceLock<PathBuf> = OnceLock::new();

/// The open file the runtime library was hashed from and is loaded from (by
/// its descriptor, on Linux): kept open for the life of the process.
static RUNTIME_FILE: OnceLock<std::fs::File> = OnceLock::new();

/// SHA-256 of the one ONNX Runtime build this stage loads: `capi/libonnxruntime.so.1.22.1`
/// of the PyPI wheel `onnxruntime==1.22.1` (manylinux_2_28 x86_64), the file and
/// hash `scripts/fetch-models.sh` installs and checks. A library is code: any
/// other file at the configured path (planted, swapped, or simply another
/// build) is refused before it is loaded.
pub const ONNXRUNTIME_SHA256: &str =
    "ad9665887025474170d3e71cd28021e7e811c5bf201bc365f953e34a2c4989cc";

/// Open the library and check its SHA-256 against [`ONNXRUNTIME_SHA256`]. The
/// file is hashed through the returned descriptor, which is what is then loaded
/// on Linux (`/proc/self/fd/N`), so a file swapped after the check is not the
/// one loaded.
fn verified_runtime(runtime: &Path) -> Result<std::fs::File, EmbedError> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek};
    let io_err = |e: std::io::Error| EmbedError::Load {
        dir: runtime.to_path_buf(),
        message: format!("reading the ONNX Runtime library: {e}"),
    };
    let mut file = std::fs::File::open(runtime).map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let actual = hex::encode(hasher.finalize());
    if actual != ONNXRUNTIME_SHA256 {
        return Err(EmbedError::RuntimeHash {
            path: runtime.to_path_buf(),
            expected: ONNXRUNTIME_SHA256.to_string(),
            actual,
        });
    }
    file.rewind().map_err(io_err)?;
    Ok(file)
}

/// The path the dynamic loader is given for a verified library file.
#[cfg(target_os = "linux")]
fn load_path(file: &std::fs::File, _runtime: &Path) -> String {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", file.as_raw_fd())
}

#[cfg(not(target_os = "linux"))]
fn load_path(_file: &std::fs::File, runtime: &Path) -> String {
    runtime.display().to_string()
}

pub(crate) struct OnnxEncoder {
    /// `Session::run` takes `&mut self`; one run at a time uses every intra-op thread.
    session: Mutex<Session>,
}

impl std::fmt::Debug for OnnxEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEncoder").finish_non_exhaustive()
    }
}

/// Load the runtime library once per process. A second request for another file
/// is an error rather than a silent use of the first.
fn init_runtime(runtime: &Path, dir: &Path) -> Result<(), EmbedError> {
    let load_err = |message: String| EmbedError::Load {
        dir: dir.to_path_buf(),
        message,
    };
    if !runtime.is_file() {
        return Err(EmbedError::MissingRuntime {
            path: runtime.to_path_buf(),
        });
    }
    // One load at a time: two models loaded at once (tests, a gateway and its
    // reviewer) each found the runtime unloaded, and the second, finding it
    // loaded by the first once its own check of the file was done, refused the
    // very same file.
    static LOADING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _loading = LOADING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if RUNTIME.get().is_some_and(|loaded| loaded == runtime) {
        return Ok(());
    }
    // Checked before anything else is said of the file, so a planted library is
    // reported as such however the process got here.
    let file = verified_runtime(runtime)?;
    if let Some(loaded) = RUNTIME.get() {
        return Err(load_err(format!(
            "ONNX Runtime is already loaded from {} in this process; it cannot also load {}",
            loaded.display(),
            runtime.display()
        )));
    }
    let path = runtime.to_path_buf();
    let load_from = load_path(&file, runtime);
    // `ort` panics (rather than returning an error) when the library cannot be
    // opened or is too old; turn that into an error naming the file.
    let committed = std::panic::catch_unwind(|| {
        ort::init_from(load_from)
            .with_name("portcullis")
            .with_telemetry(false)
            .commit()
    });
    match committed {
        Ok(Ok(_)) => {
            let _ = RUNTIME_FILE.set(file);
            let _ = RUNTIME.set(path);
            Ok(())
        }
        Ok(Err(e)) => Err(load_err(format!("ONNX Runtime {}: {e}", runtime.display()))),
        Err(_) => Err(load_err(format!(
            "cannot load the ONNX Runtime library {} (it must be ONNX Runtime 1.22.x, the version the `ort` crate binds, \
             for this platform; scripts/fetch-models.sh installs the Linux x86_64 build, \
             elsewhere set embedding.backend = \"candle\")",
            runtime.display()
        ))),
    }
}

impl OnnxEncoder {
    pub(crate) fn load(
        dir: &Path,
        runtime: &Path,
        threads: usize,
    ) -> Result<OnnxEncoder, EmbedError> {
        init_runtime(runtime, dir)?;
        let load_err = |e: ort::Error| EmbedError::Load {
            dir: dir.to_path_buf(),
            message: format!("{MODEL_FILE}: {e}"),
        };
        let session = Session::builder()
            .and_then(|b| b.with_optimization_level(GraphOptimizationLevel::Level3))
            .and_then(|b| b.with_intra_threads(threads))
            .and_then(|b| b.with_inter_threads(1))
            // Idle worker threads sleep instead of spinning: the gateway shares its
            // cores with the client, the upstreams and the other stages.
            .and_then(|b| b.with_intra_op_spinning(false))
            .and_then(|b| b.commit_from_file(dir.join(MODEL_FILE)))
            .map_err(load_err)?;
        let names: Vec<&str> = session.inputs.iter().map(|i| i.name.as_str()).collect();
        if names != ["input_ids", "attention_mask"] {
            return Err(EmbedError::Load {
                dir: dir.to_path_buf(),
                message: format!(
                    "{MODEL_FILE} takes inputs {names:?}, expected [\"input_ids\", \"attention_mask\"] \
                     (write it with scripts/export-onnx.py)"
                ),
            });
        }
        Ok(OnnxEncoder {
            session: Mutex::new(session),
        })
    }
}

impl Encoder for OnnxEncoder {
    fn encode(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let p = Padded::<i64>::new(batch);
        let (b, len) = (p.rows, p.len);
        let infer = |e: ort::Error| EmbedError::Inference(e.to_string());
        let shape = [b as i64, len as i64];
        let ids = TensorRef::from_array_view((shape, p.ids.as_slice())).map_err(infer)?;
        let mask = TensorRef::from_array_view((shape, p.mask.as_slice())).map_err(infer)?;
        let mut session = self.session.lock().map_err(|_| {
            EmbedError::Inference("the ONNX session was poisoned by a panic".into())
        })?;
        let outputs = session
            .run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])
            .map_err(infer)?;
        let (out_shape, data) = outputs["sentence_embedding"]
            .try_extract_tensor::<f32>()
            .map_err(infer)?;
        if out_shape.len() != 2 || out_shape[0] != b as i64 || out_shape[1] != DIM as i64 {
            return Err(EmbedError::Inference(format!(
                "{MODEL_FILE} returned shape {out_shape:?}, expected [{b}, {DIM}]"
            )));
        }
        Ok(data.chunks_exact(DIM).map(<[f32]>::to_vec).collect())
    }

    /// Measured (`reports/embedding-bench.md`): passes of 4 x 128 tokens run as fast
    /// as 32 x 128 here, and keep the memory arena near its size after loading
    /// (peak RSS 172 MiB instead of 262 MiB for a batch of 32 x 128).
    fn max_batch_tokens(&self) -> usize {
        512
    }
}
