//! Builds the eBPF programs of `ebpf/programs` for bpfel (aya-build: nightly with rust-src,
//! `-Z build-std=core`, linked by bpf-linker) into `$OUT_DIR/portcullis-ebpf`, which
//! `kernel/` embeds. `AYA_BUILD_SKIP=1` skips it: the binary then runs without the kernel path.

use std::path::{Path, PathBuf};

const OBJECT: &str = "portcullis-ebpf";
/// The XDP filter: its own object (a second binary of the package).
const XDP_OBJECT: &str = "portcullis-xdp";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let ebpf = manifest.join("../ebpf");
    let programs = ebpf.join("programs");
    println!(
        "cargo:rerun-if-changed={}",
        ebpf.join("common/src").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        ebpf.join("common/Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        ebpf.join("programs/src").display()
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let object = out.join(OBJECT);
    let skip = std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v == "true");
    if !skip {
        let Some(linker) = bpf_linker() else {
            panic!(
                "bpf-linker not found (neither on PATH nor in ~/.cargo/bin): run `cargo xtask setup` \
                 (it installs LLVM 22, bpf-linker and nightly with rust-src), or build with \
                 AYA_BUILD_SKIP=1 for a binary without the kernel path"
            );
        };
        if let Some(dir) = linker.parent() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
            if !dirs.iter().any(|d| d == dir) {
                dirs.insert(0, dir.to_path_buf());
                if let Ok(joined) = std::env::join_paths(dirs) {
                    // SAFETY: the build script has no other threads yet.
                    unsafe { std::env::set_var("PATH", joined) };
                }
            }
        }
        // aya-build runs `cargo build --package` in the current directory: ebpf/programs is its
        // own workspace (excluded from this one), so build from there.
        if let Err(e) = std::env::set_current_dir(&programs) {
            panic!("cannot enter {}: {e}", programs.display());
        }
        let root = programs.to_string_lossy().into_owned();
        let pkg = aya_build::Package {
            name: OBJECT,
            root_dir: &root,
            ..Default::default()
        };
        if let Err(e) = aya_build::build_ebpf([pkg], aya_build::Toolchain::default()) {
            panic!(
                "building the eBPF programs ({}) failed: {e:#}\n\
                 `cargo xtask setup` installs what they need (nightly with rust-src, bpf-linker)",
                programs.display()
            );
        }
    }
    for obj in [object, out.join(XDP_OBJECT)] {
        if !obj.exists() {
            // Skipped: an empty object tells kernel/ the programs were not built.
            if let Err(e) = std::fs::write(&obj, b"") {
                panic!("cannot write {}: {e}", obj.display());
            }
        }
    }
}

fn bpf_linker() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    std::env::split_paths(&path)
        .chain(cargo_home.map(|h| h.join("bin")))
        .map(|d| d.join("bpf-linker"))
        .find(|p| p.is_file())
}
