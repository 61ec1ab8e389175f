//! Checks that the documents state counts that are true of the tree, rust-analyzer's "tidy"
//! style: a number in the README that a file listing can confirm is confirmed here.

use crate::workspace_root;

/// The number just before `suffix` in `text` (`"(63 UI cases"` → 63), if `suffix` occurs.
fn number_before(text: &str, suffix: &str) -> Option<usize> {
    let at = text.find(suffix)?;
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// The files of `dir` (relative to the workspace root) whose name ends with `ext`.
fn count_files(dir: &str, ext: &str) -> usize {
    std::fs::read_dir(workspace_root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(ext))
        .count()
}

#[test]
fn readme_ui_case_count_is_the_number_of_ui_cases() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let stated = number_before(&readme, " UI cases in `tests/ui/`")
        .expect("the README states how many UI cases `tests/ui/` holds");
    let cases = count_files("tests/ui", ".rs");
    assert_eq!(
        stated, cases,
        "README.md says {stated} UI cases, tests/ui/ has {cases}: update the README"
    );
    // Every case has its expected compiler output beside it.
    assert_eq!(count_files("tests/ui", ".stderr"), cases);
}

#[test]
fn number_before_reads_the_digits_next_to_the_phrase() {
    assert_eq!(number_before("has (63 UI cases", " UI cases"), Some(63));
    assert_eq!(number_before("no count UI cases", " UI cases"), None);
    assert_eq!(number_before("nothing", " UI cases"), None);
}
