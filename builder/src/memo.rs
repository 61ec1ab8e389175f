//! Stages skipped when their inputs are what they were at the last build of the crate: a
//! stamp file beside a stage's outputs holds a hash of its inputs (text, options, the tool's
//! path), and a stage whose stamp matches and whose outputs are all there reuses them. An edit
//! that leaves the PTX as it was (a comment, host-only code in the kernel crate) then costs
//! no `opt`, `llc` or `ptxas`.

use std::hash::{Hash, Hasher};
use std::path::Path;

/// The stamp of a stage's inputs: a hash of each part and its length.
pub(crate) fn key(parts: &[&[u8]]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.len().hash(&mut h);
        p.hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// What identifies this builder's code: a hash of the running program (the build script it is
/// linked into), so that a stage whose inputs are unchanged still runs again when the builder
/// that transforms them changed. Empty where the program cannot be read (then the stamps
/// miss only that).
pub(crate) fn builder_identity() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .and_then(std::fs::read)
            .map(|bytes| key(&[&bytes]))
            .unwrap_or_default()
    })
}

/// Whether `stamp` holds `key` and every output exists: the stage may be skipped.
pub(crate) fn fresh(stamp: &Path, key: &str, outputs: &[&Path]) -> bool {
    std::fs::read_to_string(stamp).is_ok_and(|s| s == key) && outputs.iter().all(|p| p.is_file())
}

/// Record that the stage's outputs are those of the inputs `key`. Written for speed only: a
/// stamp that cannot be written means the stage runs again next time.
pub(crate) fn record(stamp: &Path, key: &str) {
    let _ = std::fs::write(stamp, key);
}

/// Forget the stage's inputs before it writes its outputs, so that a build stopped half way
/// never leaves a stamp beside outputs of other inputs.
pub(crate) fn clear(stamp: &Path) {
    let _ = std::fs::remove_file(stamp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_is_fresh_only_with_its_key_and_its_outputs() {
        let dir = std::env::temp_dir().join(format!("berth-memo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (stamp, out) = (dir.join("stage.key"), dir.join("out.ptx"));
        let k = key(&[b"module", b"sm_90"]);
        assert_ne!(k, key(&[b"module", b"sm_80"]));
        // The parts' boundaries count: "ab" + "c" is not "a" + "bc".
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        assert!(!fresh(&stamp, &k, &[&out]));
        record(&stamp, &k);
        assert!(!fresh(&stamp, &k, &[&out]), "the output is missing");
        std::fs::write(&out, "ptx").unwrap();
        assert!(fresh(&stamp, &k, &[&out]));
        assert!(!fresh(&stamp, &key(&[b"other"]), &[&out]));
        clear(&stamp);
        assert!(!fresh(&stamp, &k, &[&out]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
