//! `cargo xtask rebuild`: how long a one-line edit of a kernel takes to rebuild. A workspace
//! of a kernel crate (`bench/rebuild/kernels.rs`) and a program that launches its kernels
//! (`bench/rebuild/app.rs`), depending on this checkout by path, is written under
//! `target/rebuild/`; the program is built once (dependencies and all), then a constant in
//! one kernel is changed and the program built again, `--edits` times (changed back and
//! forth), then a comment alone is changed. Each build's wall time is printed with the GPU
//! build's stages (the kernel crate's `timings.txt`), one JSON line each into `--out`.
//! Nothing is written outside `target/`.
//!
//! With `--crates`, the same for this workspace's own kernel crates instead ([`CRATE_EDITS`];
//! `--only CRATE` for some of them):
//! one line of one kernel of each is changed in place and changed back, `--edits` times, and
//! `cargo build -p <crate> --lib` timed in the workspace's target directory. The file is
//! restored after each build, and on the way out of an error.

use crate::Result;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const USAGE: &str = "usage: cargo xtask rebuild [--crates [--only CRATE]...] [--profile dev|release]... [--edits N] [--out FILE]";

/// The line of `kernels.rs` the edits change, and what they change it to.
const EDIT: (&str, &str) = ("let scale = 2.0f32; // EDIT", "let scale = 3.0f32; // EDIT");

/// The workspace's kernel crates `--crates` measures: the crate, the file, the text an edit
/// changes (found once in the file), what it becomes, and what the edit is.
const CRATE_EDITS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "berth-examples",
        "examples/src/lib.rs",
        "pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {\n    let i = thread::index();\n    if i < y.len() {\n        y[i] += a * x[i];",
        "pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {\n    let i = thread::index();\n    if i < y.len() {\n        y[i] += x[i] * a;",
        "the operands of saxpy's product swapped",
    ),
    (
        "berth-examples-compute",
        "examples/compute/src/plain.rs",
        "let s = o.m * inv * inv * inv;",
        "let s = 2.0 * o.m * inv * inv * inv;",
        "a factor added to plain_nbody's force",
    ),
    (
        "berth-examples-tensor",
        "examples/tensor/src/tensor.rs",
        "|| c.len() < m * n\n        || smem.len() * 2 < MMA_SHARED_BYTES",
        "|| c.len() < m * n + 1\n        || smem.len() * 2 < MMA_SHARED_BYTES",
        "a bound of the mma.sync GEMM's argument check changed",
    ),
    (
        "berth-examples-tpch",
        "examples/tpch/src/q14.rs",
        "let rev = (price.at(i) * (100 - discount.at(i))) as u64;",
        "let rev = (price.at(i) * (101 - discount.at(i))) as u64;",
        "a constant of Q14's revenue changed",
    ),
    (
        "berth-fixtures",
        "fixtures/src/lib.rs",
        "pub fn fill(value: u32, out: &mut [u32]) {\n    let i = thread::index();\n    if i < out.len() {\n        out[i] = value;",
        "pub fn fill(value: u32, out: &mut [u32]) {\n    let i = thread::index();\n    if i < out.len() {\n        out[i] = value + 1;",
        "fill's stored value changed",
    ),
    (
        "berth-fixtures-tensor",
        "fixtures/tensor/src/async_copy.rs",
        "let from = 4 * ((t + 1) % n);",
        "let from = 4 * ((t + 2) % n);",
        "the neighbour stage_sums reads changed",
    ),
];

/// One timed build: its wall time, whether the GPU build ran, and its stages.
struct Timed {
    wall: f64,
    ran: bool,
    stages: Vec<(String, f64)>,
}

/// Run `cargo build` with `args` in `dir`, timed, and read the GPU build's `timings` if it
/// ran.
fn timed_build(dir: &Path, args: &[&str], timings: &Path, what: &str) -> Result<Timed> {
    let before = std::fs::metadata(timings).and_then(|m| m.modified()).ok();
    let start = Instant::now();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(dir)
        .arg("build")
        .args(args)
        .status()?;
    let wall = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("the build after `{what}` failed").into());
    }
    let ran = std::fs::metadata(timings).and_then(|m| m.modified()).ok() != before;
    let stages = if ran {
        read_stages(timings)
    } else {
        Vec::new()
    };
    Ok(Timed { wall, ran, stages })
}

/// The table row and the JSON line of a timed build.
fn report(t: &Timed, krate: &str, profile: &str, what: &str, commit: &str) -> String {
    let stage = |names: &[&str]| -> Option<f64> {
        let found: Vec<f64> = t
            .stages
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, s)| *s)
            .collect();
        (!found.is_empty()).then(|| found.iter().sum())
    };
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    let cell = |v: Option<f64>| v.map_or("–".to_owned(), |s| format!("{s:.2}"));
    println!(
        "| {krate} | {profile} | {what} | {:.2} | {} | {} | {} | {} | {load} |",
        t.wall,
        cell(stage(&["nested build"])),
        cell(stage(&["link", "disassembly and IR rewrites"])),
        cell(stage(&["opt and llc"])),
        cell(stage(&["ptxas"])),
    );
    let stages_json: Vec<String> = t
        .stages
        .iter()
        .map(|(n, s)| format!("{:?}: {s:.3}", n))
        .collect();
    format!(
        "{{\"bench\": \"rebuild\", \"commit\": \"{commit}\", \"crate\": \"{krate}\", \"profile\": \"{profile}\", \"build\": \"{what}\", \"wall_s\": {:.3}, \"gpu_build_ran\": {}, \"stages_s\": {{{}}}, \"load\": \"{load}\", \"cores\": {}}}",
        t.wall,
        t.ran,
        stages_json.join(", "),
        std::thread::available_parallelism().map_or(1, usize::from),
    )
}

/// Puts a source file back as it was when dropped.
struct Restore<'a> {
    path: &'a Path,
    text: String,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(self.path, &self.text) {
            eprintln!("could not restore {}: {e}", self.path.display());
        }
    }
}

/// `--crates`: each of [`CRATE_EDITS`] in each profile, in this workspace.
fn crates(
    root: &Path,
    profiles: &[String],
    edits: usize,
    commit: &str,
    only: &[String],
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for &(krate, file, from, to, what) in CRATE_EDITS
        .iter()
        .filter(|e| only.is_empty() || only.iter().any(|o| o == e.0))
    {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path)?;
        if text.matches(from).count() != 1 {
            return Err(format!("{file}: the text `{from}` should be found once").into());
        }
        let edited = text.replacen(from, to, 1);
        let _restore = Restore {
            path: &path,
            text: text.clone(),
        };
        let timings = root
            .join("target/berth-nvptx/berth")
            .join(krate.replace('-', "_"))
            .join("timings.txt");
        for profile in profiles {
            let args = ["-q", "-p", krate, "--lib", "--profile", profile.as_str()];
            std::fs::write(&path, &text)?;
            let first = timed_build(root, &args, &timings, "first build of the run")?;
            lines.push(report(
                &first,
                krate,
                profile,
                "first build of the run",
                commit,
            ));
            for k in 0..edits {
                std::fs::write(&path, if k % 2 == 0 { &edited } else { &text })?;
                let t = timed_build(root, &args, &timings, what)?;
                lines.push(report(&t, krate, profile, what, commit));
            }
        }
    }
    Ok(lines)
}

pub fn run(args: &[String]) -> Result {
    let mut profiles = Vec::new();
    let mut edits = 3usize;
    let mut in_workspace = false;
    let mut only: Vec<String> = Vec::new();
    let root = crate::workspace_root();
    let mut out = root.join("target/rebuild/rebuild.jsonl");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--profile" => match value()?.as_str() {
                p @ ("dev" | "release") => profiles.push(p.to_owned()),
                other => return Err(format!("no profile `{other}`\n{USAGE}").into()),
            },
            "--edits" => edits = value()?.parse().map_err(|e| format!("--edits: {e}"))?,
            "--out" => out = PathBuf::from(value()?),
            "--crates" => in_workspace = true,
            "--only" => only.push(value()?.to_owned()),
            _ => return Err(USAGE.into()),
        }
    }
    if profiles.is_empty() {
        profiles = vec!["dev".into(), "release".into()];
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!(
        "| crate | profile | build | wall s | nested rustc | link + rewrites | opt + llc | ptxas | load |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    let lines = if in_workspace {
        crates(&root, &profiles, edits, &commit, &only)?
    } else {
        small_crate(&root, &profiles, edits, &commit)?
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, lines.join("\n") + "\n")?;
    println!("\nraw lines: {}", out.display());
    Ok(())
}

/// The kernel crate of `bench/rebuild/kernels.rs`, in a workspace of its own.
fn small_crate(
    root: &Path,
    profiles: &[String],
    edits: usize,
    commit: &str,
) -> Result<Vec<String>> {
    let ws = root.join("target/rebuild/ws");
    write_workspace(root, &ws)?;
    let target = root.join("target/rebuild/target");
    let mut lines = Vec::new();
    for profile in profiles {
        let lib = ws.join("kernels/src/lib.rs");
        let source = std::fs::read_to_string(root.join("bench/rebuild/kernels.rs"))?;
        std::fs::write(&lib, &source)?;
        let mut builds: Vec<(String, String)> =
            vec![("first build of the run".into(), source.clone())];
        for k in 0..edits {
            let text = if k % 2 == 0 {
                source.replace(EDIT.0, EDIT.1)
            } else {
                source.clone()
            };
            builds.push(("a constant in one kernel".into(), text));
        }
        let last = builds.last().map(|(_, t)| t.clone()).unwrap_or_default();
        builds.push((
            "a comment".into(),
            last.replace("// EDIT", "// EDIT (a comment changed)"),
        ));
        for (what, text) in builds {
            std::fs::write(&lib, &text)?;
            let timings = target.join("berth-nvptx/berth/rebuild_kernels/timings.txt");
            let target_arg = target.display().to_string();
            let args = [
                "-q",
                "-p",
                "rebuild-app",
                "--profile",
                profile.as_str(),
                "--target-dir",
                target_arg.as_str(),
            ];
            let t = timed_build(&ws, &args, &timings, &what)?;
            lines.push(report(&t, "rebuild-kernels", profile, &what, commit));
        }
    }
    Ok(lines)
}

/// The workspace under `ws`: the kernel crate and the program, on this checkout by path, with
/// this checkout's lock file (the same versions of every dependency).
fn write_workspace(root: &Path, ws: &Path) -> Result {
    let dep = |p: &str| format!("{{ path = {:?} }}", root.join(p).display().to_string());
    let files = [
        (
            "Cargo.toml",
            // The builder optimised, as docs/getting-started.md recommends.
            "[workspace]\nmembers = [\"kernels\", \"app\"]\nresolver = \"3\"\n\n\
             [profile.dev.package.berth-gpu-build]\nopt-level = 3\n\n\
             [profile.release.package.berth-gpu-build]\nopt-level = 3\n"
                .to_owned(),
        ),
        (
            "kernels/Cargo.toml",
            format!(
                "[package]\nname = \"rebuild-kernels\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [dependencies]\nberth-gpu = {}\n\n[build-dependencies]\nberth-gpu-build = {}\n",
                dep("."),
                dep("builder")
            ),
        ),
        (
            "kernels/build.rs",
            "fn main() {\n    berth_build::kernels()\n}\n".to_owned(),
        ),
        (
            "app/Cargo.toml",
            format!(
                "[package]\nname = \"rebuild-app\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [dependencies]\nberth-gpu = {}\nrebuild-kernels = {{ path = \"../kernels\" }}\n",
                dep(".")
            ),
        ),
        (
            "app/src/main.rs",
            std::fs::read_to_string(root.join("bench/rebuild/app.rs"))?,
        ),
    ];
    for (path, text) in files {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text)?;
        }
    }
    std::fs::create_dir_all(ws.join("kernels/src"))?;
    if !ws.join("Cargo.lock").is_file() {
        std::fs::copy(root.join("Cargo.lock"), ws.join("Cargo.lock"))?;
    }
    Ok(())
}

/// The stages of a GPU build's `timings.txt` (`stage: N ms`), in seconds.
fn read_stages(path: &Path) -> Vec<(String, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, ms) = l.split_once(": ")?;
            let ms: f64 = ms.strip_suffix(" ms")?.parse().ok()?;
            Some((name.to_owned(), ms / 1e3))
        })
        .collect()
}
