//! `toolgate-bench-json-floor CASE FILE N`: reads FILE (bench/run.py writes the list rows' answer,
//! bench/workload.py `tools_list_response`) and validates it N times with CASE, for callgrind
//! (bench/counts.py `json_floor` counts N = 101 and N = 1 and divides the difference by 100):
//! - `sonic-rs`: `sonic_rs::from_slice` into `IgnoredAny` (the whole text checked, nothing built);
//! - `simd-json`: `simd_json::fill_tape` (stage 1 and 2; the text is copied into the buffer it
//!   rewrites in place first, a 30 KB copy counted with it);
//! - `serde_json`: `serde_json::from_slice` into `IgnoredAny`.
//!
//! Built with `-C target-cpu=x86-64-v3` (bench/counts.py): AVX2, the widest SIMD valgrind executes
//! (it stops at AVX-512), so each reader runs its fastest path that callgrind can count. A failed
//! validation is an error, never a count.
use std::hint::black_box;
use std::process::ExitCode;

use serde::de::IgnoredAny;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(case), Some(file), Some(n)) = (args.get(1), args.get(2), args.get(3).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("usage: toolgate-bench-json-floor sonic-rs|simd-json|serde_json FILE N");
        return ExitCode::from(2);
    };
    let text = match std::fs::read(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{file}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut scratch = text.clone();
    let mut buffers = simd_json::Buffers::new(text.len());
    for _ in 0..n {
        let ok = match case.as_str() {
            "sonic-rs" => sonic_rs::from_slice::<IgnoredAny>(black_box(&text)).is_ok(),
            "simd-json" => {
                scratch.copy_from_slice(&text);
                simd_json::fill_tape(black_box(&mut scratch), &mut buffers, &mut simd_json::Tape::null()).is_ok()
            }
            "serde_json" => serde_json::from_slice::<IgnoredAny>(black_box(&text)).is_ok(),
            other => {
                eprintln!("unknown case {other}");
                return ExitCode::from(2);
            }
        };
        if !ok {
            eprintln!("{case}: {file} is not valid JSON");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
