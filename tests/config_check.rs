//! `portcullis -c`: the real binary on real files.

use std::process::Command;

#[test]
fn version_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("-v")
        .output()
        .expect("run portcullis");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("portcullis version"));
}
