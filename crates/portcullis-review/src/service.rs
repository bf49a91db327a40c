//! The review service: worker threads that each own a backend, a concurrency
//! limit, a deadline per call, and the verdict cache. A caller that cannot get a
//! verdict in time gets an error — the detector turns every error into a held
//! item, never into an allowed one.

use crate::cache::{self, Cache};
use crate::prompt::truncate_middle;
use crate::{Backend, ReviewError, Verdict};
pub use portcullis_core::WhenBusy;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Settings {
    /// Per call, from the request to the verdict (waiting included).
    pub timeout: Duration,
    pub when_busy: WhenBusy,
    /// Longer texts are cut in the middle to this many characters.
    pub max_input_chars: usize,
    /// Verdicts kept (0 = no cache).
    pub cache_entries: usize,
}

/// One review: the verdict or why there is none, and how it was obtained.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: Result<Verdict, ReviewError>,
    pub cached: bool,
    /// Hash of (model, template, input): the cache key.
    pub key: String,
    pub truncated: bool,
    pub micros: u64,
}

struct Job {
    text: String,
    deadline: Instant,
    reply: mpsc::SyncSender<Result<Verdict, ReviewError>>,
}

/// Free workers; a caller takes one before queueing its job.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking holder leaves plain data behind (a count, a cache): still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slots {
    fn take(&self, wait: bool, deadline: Instant) -> Result<(), ReviewError> {
        let mut free = lock(&self.free);
        loop {
            if *free > 0 {
                *free -= 1;
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !wait {
                return Err(ReviewError::Saturated(0));
            }
            if left.is_zero() {
                return Err(ReviewError::Timeout(0));
            }
            free = self
                .freed
                .wait_timeout(free, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn give(&self) {
        *lock(&self.free) += 1;
        self.freed.notify_one();
    }
}

pub struct Reviewer {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    slots: Arc<Slots>,
    workers: Vec<JoinHandle<()>>,
    cache: Mutex<Cache>,
    settings: Settings,
    model_id: String,
    template: String,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("model_id", &self.model_id)
            .field("workers", &self.workers.len())
            .finish()
    }
}

impl Reviewer {
    /// One worker thread per backend (the concurrency limit is their number).
    pub fn start(
        backends: Vec<Box<dyn Backend>>,
        settings: Settings,
    ) -> Result<Reviewer, ReviewError> {
        let first = backends.first().ok_or(ReviewError::Stopped)?;
        let (model_id, template) = (first.model_id(), first.template_sha256());
        let slots = Arc::new(Slots {
            free: Mutex::new(backends.len()),
            freed: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (i, mut backend) in backends.into_iter().enumerate() {
            let rx = rx.clone();
            let slots = slots.clone();
            // The model's matrix products run on a thread pool of the worker's
            // own. On rayon's global pool they would queue behind the callers'
            // tasks — which, when the callers are themselves rayon tasks (as in
            // `eval`), are blocked waiting for this very verdict.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |t| format!("portcullis-review-{i}-{t}"))
                .build()
                .map_err(|e| ReviewError::Inference(format!("cannot start a worker: {e}")))?;
            let handle = std::thread::Builder::new()
                .name(format!("portcullis-review-{i}"))
                .spawn(move || loop {
                    let job = match lock(&rx).recv() {
                        Ok(job) => job,
                        Err(_) => return,
                    };
                    let result = if Instant::now() >= job.deadline {
                        Err(ReviewError::Timeout(0))
                    } else {
                        pool.install(|| backend.classify(&job.text, job.deadline))
                    };
                    slots.give();
                    // The caller may have given up; its verdict is then dropped.
                    let _ = job.reply.send(result);
                })
                .map_err(|e| ReviewError::Inference(format!("cannot start a worker: {e}")))?;
            workers.push(handle);
        }
        Ok(Reviewer {
            jobs: Mutex::new(Some(tx)),
            slots,
            workers,
            cache: Mutex::new(Cache::new(settings.cache_entries)),
            settings,
            model_id,
            template,
        })
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn template_sha256(&self) -> &str {
        &self.template
    }

    pub fn concurrency(&self) -> usize {
        self.workers.len()
    }

    /// Review one text (cut to `max_input_chars` first).
    pub fn review(&self, text: &str) -> Outcome {
        let started = Instant::now();
        let (input, truncated) = truncate_middle(text, self.settings.max_input_chars);
        let key = cache::key(&self.model_id, &self.template, &input);
        let done = |result, cached| Outcome {
            result,
            cached,
            key: key.clone(),
            truncated,
            micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        };
        if let Some(v) = lock(&self.cache).get(&key) {
            return done(Ok(v.clone()), true);
        }
        let result = self.ask(input, started + self.settings.timeout);
        if let Ok(v) = &result {
            lock(&self.cache).insert(key.clone(), v.clone());
        }
        done(result, false)
    }

    fn ask(&self, text: String, deadline: Instant) -> Result<Verdict, ReviewError> {
        let ms = self.settings.timeout.as_millis() as u64;
        let wait = self.settings.when_busy == WhenBusy::Wait;
        match self.slots.take(wait, deadline) {
            Ok(()) => {}
            Err(ReviewError::Saturated(_)) => {
                return Err(ReviewError::Saturated(self.workers.len()))
            }
            Err(_) => return Err(ReviewError::Timeout(ms)),
        }
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = lock(&self.jobs).as_ref().map(|tx| {
            tx.send(Job {
                text,
                deadline,
                reply,
            })
        });
        if !matches!(sent, Some(Ok(()))) {
            self.slots.give();
            return Err(ReviewError::Stopped);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match answer.recv_timeout(left) {
            Ok(Err(ReviewError::Timeout(_))) => Err(ReviewError::Timeout(ms)),
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(ReviewError::Timeout(ms)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(ReviewError::Stopped),
        }
    }
}

impl Drop for Reviewer {
    fn drop(&mut self) {
        lock(&self.jobs).take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Label;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A backend whose answer and delay the test chooses (the real ones are
    /// tested in tests/: the embedded model, and an endpoint over real HTTP).
    struct Fixed {
        delay: Duration,
        calls: Arc<AtomicUsize>,
    }

    impl Backend for Fixed {
        fn model_id(&self) -> String {
            "fixed".into()
        }
        fn template_sha256(&self) -> String {
            "t".into()
        }
        fn classify(&mut self, text: &str, _: Instant) -> Result<Verdict, ReviewError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            Ok(Verdict {
                label: if text.contains("evil") {
                    Label::Injection
                } else {
                    Label::Benign
                },
                confidence: 0.9,
                raw: text.len().to_string(),
            })
        }
    }

    fn reviewer(n: usize, delay_ms: u64, when_busy: WhenBusy) -> (Reviewer, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let backends = (0..n)
            .map(|_| {
                Box::new(Fixed {
                    delay: Duration::from_millis(delay_ms),
                    calls: calls.clone(),
                }) as Box<dyn Backend>
            })
            .collect();
        let settings = Settings {
            timeout: Duration::from_millis(300),
            when_busy,
            max_input_chars: 50,
            cache_entries: 16,
        };
        (Reviewer::start(backends, settings).unwrap(), calls)
    }

    #[test]
    fn identical_inputs_hit_the_cache() {
        let (r, calls) = reviewer(1, 0, WhenBusy::Wait);
        let a = r.review("evil text");
        let b = r.review("evil text");
        assert!(!a.cached && b.cached);
        assert_eq!(a.key, b.key);
        assert_eq!(a.result.unwrap(), b.result.unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(!r.review("plain").cached);
    }

    #[test]
    fn a_slow_backend_times_out_and_the_error_is_not_cached() {
        let (r, calls) = reviewer(1, 600, WhenBusy::Wait);
        let a = r.review("x");
        assert!(matches!(a.result, Err(ReviewError::Timeout(300))), "{a:?}");
        assert!(!r.review("x").cached);
        assert!(calls.load(Ordering::SeqCst) >= 1);
    }

    #[test]
    fn a_saturated_stage_refuses_at_once_when_so_configured() {
        let (r, _) = reviewer(1, 200, WhenBusy::Review);
        let r = Arc::new(r);
        let busy = {
            let r = r.clone();
            std::thread::spawn(move || r.review("first"))
        };
        std::thread::sleep(Duration::from_millis(50));
        let second = r.review("second");
        assert!(
            matches!(second.result, Err(ReviewError::Saturated(1))),
            "{second:?}"
        );
        assert!(busy.join().unwrap().result.is_ok());
    }

    #[test]
    fn long_inputs_are_cut_and_say_so() {
        let (r, _) = reviewer(1, 0, WhenBusy::Wait);
        let o = r.review(&"a".repeat(200));
        assert!(o.truncated);
        assert!(o.result.unwrap().raw.parse::<usize>().unwrap() < 60);
    }
}
