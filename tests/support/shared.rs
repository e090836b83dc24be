//! The workplace's `shared/` directory (corpus, seed configs), wherever this checkout sits.

use std::path::PathBuf;

/// `shared/<rel>`: `$CARGO_MANIFEST_DIR/../../shared` in the workplace layout, one level deeper
/// for a git worktree, else /work/shared; the first of them that holds `rel`.
pub fn shared_path(rel: &str) -> PathBuf {
    let m = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        m.join("../../shared"),
        m.join("../../../shared"),
        PathBuf::from("/work/shared"),
    ]
    .into_iter()
    .map(|p| p.join(rel))
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("shared/{rel} not found beside the checkout"))
}
