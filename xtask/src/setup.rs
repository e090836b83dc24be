//! `cargo xtask setup`: installs what the builds and tests need, only what is missing.

use crate::util::{Result, exec, have, is_root, output};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Debian packages and the command each one provides (checked when dpkg is absent).
const APT_PACKAGES: &[(&str, &str)] = &[
    ("haproxy", "haproxy"),
    ("socat", "socat"),
    ("wrk", "wrk"),
    ("nghttp2-client", "nghttp"),
    ("curl", "curl"),
    // tests/grpc.rs: a real gRPC server and client (the command is only a dpkg-less fallback).
    ("python3-grpcio", "python3"),
    ("nginx", "nginx"),
    // The bench: nginx as a TCP proxy, and the passthrough throughput client/server.
    ("libnginx-mod-stream", "nginx"),
    ("iperf3", "iperf3"),
    ("iproute2", "ip"),
    // `cargo xtask drill --failover`: VRRP between the two LB namespaces.
    ("keepalived", "keepalived"),
    ("chromium", "chromium"),
    // bpf-linker (which links the eBPF programs of ebpf/) builds against LLVM 22; Debian's default
    // llvm-config is 14, so the prefix is passed explicitly in [`ebpf_tools`].
    ("llvm-22-dev", "llvm-config-22"),
    ("libpolly-22-dev", "llvm-config-22"),
];

/// The LLVM that bpf-linker is built against (from `llvm-22-dev`).
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
/// bpf-linker's version, pinned with the LLVM it is built for.
const BPF_LINKER_VERSION: &str = "0.13.0";

const POLICY_RC: &str = "/usr/sbin/policy-rc.d";

pub fn run() -> Result {
    let started = Instant::now();
    let mut did = Vec::new();
    apt(&mut did)?;
    rust_src(&mut did);
    ebpf_tools(&mut did)?;
    fuzz_tools(&mut did)?;
    if did.is_empty() {
        println!(
            "setup: everything present ({:.1}s)",
            started.elapsed().as_secs_f64()
        );
    } else {
        println!(
            "setup: {} ({:.1}s)",
            did.join("; "),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The packages of [`APT_PACKAGES`] that are not installed.
fn missing_packages() -> Vec<&'static str> {
    let names: Vec<&str> = APT_PACKAGES.iter().map(|(p, _)| *p).collect();
    if !have("dpkg-query") {
        return APT_PACKAGES
            .iter()
            .filter(|(_, bin)| !have(bin))
            .map(|(p, _)| *p)
            .collect();
    }
    // dpkg-query exits non-zero when one package is unknown, but still prints the others.
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${db:Status-Abbrev}\\n"])
        .args(&names)
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    names
        .into_iter()
        .filter(|p| {
            !out.lines().any(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(p) && w.next().is_some_and(|s| s.starts_with("ii"))
            })
        })
        .collect()
}

fn apt(did: &mut Vec<String>) -> Result {
    let missing = missing_packages();
    if missing.is_empty() {
        return Ok(());
    }
    if !have("apt-get") {
        return Err(format!(
            "missing packages {} and no apt-get: install them by hand",
            missing.join(" ")
        ));
    }
    let sudo = if is_root() {
        None
    } else if have("sudo") {
        Some("sudo")
    } else {
        return Err(format!(
            "missing packages {} and not root (no sudo)",
            missing.join(" ")
        ));
    };
    let apt_get = |args: &[&str]| {
        let mut c = match sudo {
            Some(s) => {
                let mut c = Command::new(s);
                c.arg("apt-get");
                c
            }
            None => Command::new("apt-get"),
        };
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    // Installing nginx must not start a system nginx on :80; Debian asks policy-rc.d first.
    let guard = is_root() && !Path::new(POLICY_RC).exists();
    if guard {
        let _ = std::fs::write(POLICY_RC, "#!/bin/sh\nexit 101\n");
        let _ = exec(Command::new("chmod").args(["755", POLICY_RC]));
    }
    let result = exec(&mut apt_get(&["update", "-q"])).and_then(|()| {
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend(missing.iter().copied());
        exec(&mut apt_get(&args))
    });
    if guard {
        let _ = std::fs::remove_file(POLICY_RC);
    }
    result?;
    did.push(format!("installed {}", missing.join(" ")));
    Ok(())
}

/// The nightly toolchain with rust-src (the eBPF programs build with `-Z build-std`).
fn rust_src(did: &mut Vec<String>) {
    if !have("rustup") {
        did.push("skipped rust-src: no rustup".into());
        return;
    }
    let installed = output(Command::new("rustup").args([
        "component",
        "list",
        "--installed",
        "--toolchain",
        "nightly",
    ]));
    let Some(installed) = installed else {
        match exec(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ])) {
            Ok(()) => did.push("installed nightly with rust-src".into()),
            Err(e) => did.push(format!("could not install nightly: {e}")),
        }
        return;
    };
    if installed.lines().any(|l| l.starts_with("rust-src")) {
        return;
    }
    match exec(Command::new("rustup").args([
        "component",
        "add",
        "rust-src",
        "--toolchain",
        "nightly",
    ])) {
        Ok(()) => did.push("added rust-src to nightly".into()),
        Err(e) => did.push(format!("could not add rust-src: {e}")),
    }
}

/// bpf-linker, which proxy/build.rs needs to link ebpf/ (through aya-build).
fn ebpf_tools(did: &mut Vec<String>) -> Result {
    if bpf_linker().is_some() {
        return Ok(());
    }
    if !Path::new(LLVM_PREFIX).join("bin/llvm-config").exists() {
        return Err(format!(
            "bpf-linker needs LLVM 22 in {LLVM_PREFIX} (apt-get install llvm-22-dev libpolly-22-dev)"
        ));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let path = std::env::var("PATH").unwrap_or_default();
    exec(
        Command::new(cargo)
            .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("LLVM_PREFIX", LLVM_PREFIX)
            .env("LLVM_SYS_221_PREFIX", LLVM_PREFIX)
            .env("PATH", format!("{LLVM_PREFIX}/bin:{path}")),
    )?;
    did.push(format!("installed bpf-linker {BPF_LINKER_VERSION}"));
    Ok(())
}

/// cargo-fuzz's version, for `cargo xtask fuzz` (CI runs every target briefly).
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// cargo-fuzz, which builds the libFuzzer targets of `fuzz/` on nightly.
fn fuzz_tools(did: &mut Vec<String>) -> Result {
    if cargo_bin("cargo-fuzz").is_some() {
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    exec(Command::new(cargo).args([
        "install",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
        "--locked",
    ]))?;
    did.push(format!("installed cargo-fuzz {CARGO_FUZZ_VERSION}"));
    Ok(())
}

/// bpf-linker on `$PATH` or in cargo's bin directory (where `cargo install` puts it).
fn bpf_linker() -> Option<std::path::PathBuf> {
    cargo_bin("bpf-linker")
}

/// A tool on `$PATH` or in cargo's bin directory.
fn cargo_bin(name: &str) -> Option<std::path::PathBuf> {
    crate::util::which(name).or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
        let p = home.join("bin").join(name);
        p.exists().then_some(p)
    })
}
