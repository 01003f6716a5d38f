//! The short fuzz run (`make test`, `scripts/fuzz.sh short`): every target
//! gets its seed corpus (`seeds/NAME/`) and then a fixed number of inputs
//! mutated from it with a fixed seed, so two runs try the same inputs. Any
//! panic or broken invariant fails the test, after saving the input to
//! `artifacts/NAME/` and printing how to replay it.
//!
//! Knobs (environment):
//! - `FUZZ_ITERATIONS_SCALE`: multiply every target's iteration count (default 1);
//! - `FUZZ_SEED`: another seed (default 1), to explore beyond the fixed set;
//! - `FUZZ_INPUT=FILE`: run only that input (select the target's test by name).

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use mcp_supervisor_fuzz::{
    Harness,
    mutate::{Format, Mutator, Rng, parse_dict},
    target, watch_panics,
};

/// Per target: mutated inputs to try, their maximum length, their format, and
/// a time limit. The limit trims only the second half of the inputs on a slow
/// machine: the first half always runs, whatever the clock says (a test
/// asserts what it tried, never how fast), and the test checks it did. The
/// limits add up to 84 s, so even one target after another the short run
/// fuzzes for about a minute on a machine that reaches them; the tests run
/// in parallel, and on a 2-core machine the whole run takes about 20 s.
struct Plan {
    name: &'static str,
    iterations: u64,
    max_len: usize,
    format: Format,
    time_limit: Duration,
}

fn fuzz(plan: Plan) {
    watch_panics();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = target(plan.name).expect("a known target");

    if let Ok(file) = std::env::var("FUZZ_INPUT") {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        run(&data);
        eprintln!("{}: {file} ran cleanly", plan.name);
        return;
    }

    let corpus = read_dir(&root.join("seeds").join(plan.name));
    assert!(
        !corpus.is_empty(),
        "no seed corpus in seeds/{} (each target needs a few files)",
        plan.name
    );
    let dict = std::fs::read_to_string(root.join("dicts").join(format!("{}.dict", plan.name)))
        .map(|text| parse_dict(&text))
        .unwrap_or_default();
    let scale: u64 = std::env::var("FUZZ_ITERATIONS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let iterations = plan.iterations * scale;
    // Always run: the first half of the fixed inputs.
    let minimum = iterations / 2;
    let time_limit = plan.time_limit * u32::try_from(scale).unwrap_or(u32::MAX);

    let started = Instant::now();
    for input in &corpus {
        one(plan.name, run, input, root);
    }
    let mutator = Mutator {
        corpus: &corpus,
        dict: &dict,
        max_len: plan.max_len,
        format: plan.format,
    };
    let mut rng = Rng::new(seed);
    let mut done = 0;
    while done < iterations {
        if done >= minimum && started.elapsed() > time_limit {
            eprintln!(
                "{}: stopped at the {time_limit:?} limit after {done} of {iterations} mutated inputs",
                plan.name
            );
            break;
        }
        let input = mutator.generate(&mut rng);
        one(plan.name, run, &input, root);
        done += 1;
    }
    assert!(
        done >= minimum,
        "{}: only {done} mutated inputs ran, fewer than the {minimum} every run must try",
        plan.name
    );
    eprintln!(
        "{}: {} seeds and {done} mutated inputs (seed {seed}) in {:.1?}, no crash",
        plan.name,
        corpus.len(),
        started.elapsed()
    );
}

/// Runs one input; on a panic, saves it and fails with how to replay it.
fn one(name: &str, run: Harness, input: &[u8], root: &Path) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(input))) {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "(a non-string panic)".to_owned());
        let dir = root.join("artifacts").join(name);
        let saved = std::fs::create_dir_all(&dir)
            .and_then(|()| {
                let file = dir.join(format!("crash-{:016x}", fnv1a(input)));
                std::fs::write(&file, input).map(|()| file)
            })
            .map(|file| file.display().to_string())
            .unwrap_or_else(|e| format!("(could not save it: {e})"));
        panic!(
            "fuzz target {name} failed on a {}-byte input: {message}\n\
             input (lossy UTF-8): {:?}\n\
             saved to {saved}; replay with: scripts/fuzz.sh replay {name} {saved}",
            input.len(),
            String::from_utf8_lossy(input),
        );
    }
}

fn read_dir(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|path| path.is_file());
    files.sort();
    files
        .iter()
        .map(|path| std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn config_parse() {
    fuzz(Plan {
        name: "config_parse",
        iterations: 15_000,
        max_len: 4096,
        format: Format::Toml,
        time_limit: Duration::from_secs(15),
    });
}

#[test]
fn retry_after() {
    fuzz(Plan {
        name: "retry_after",
        iterations: 400_000,
        max_len: 256,
        format: Format::Bytes,
        time_limit: Duration::from_secs(6),
    });
}

#[test]
fn classify() {
    fuzz(Plan {
        name: "classify",
        iterations: 300_000,
        max_len: 512,
        format: Format::Bytes,
        time_limit: Duration::from_secs(6),
    });
}

#[test]
fn jsonrpc_parse() {
    fuzz(Plan {
        name: "jsonrpc_parse",
        iterations: 30_000,
        max_len: 8192,
        format: Format::Json { prefix: 0 },
        time_limit: Duration::from_secs(12),
    });
}

#[test]
fn gateway_http() {
    fuzz(Plan {
        name: "gateway_http",
        iterations: 3_000,
        max_len: 8192,
        format: Format::Json { prefix: 1 },
        time_limit: Duration::from_secs(15),
    });
}

#[test]
fn standing() {
    fuzz(Plan {
        name: "standing",
        iterations: 400,
        max_len: 4096,
        format: Format::Json { prefix: 1 },
        time_limit: Duration::from_secs(20),
    });
}

#[test]
fn codec() {
    fuzz(Plan {
        name: "codec",
        iterations: 40_000,
        max_len: 2048,
        format: Format::Json { prefix: 0 },
        time_limit: Duration::from_secs(10),
    });
}
