//! Small helpers shared by the commands.

use std::path::{Path, PathBuf};
use std::process::Command;

pub type Result<T = ()> = std::result::Result<T, String>;

/// The workspace root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Where cargo puts its output: `$CARGO_TARGET_DIR` or `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() { d } else { root().join(d) }
        }
        None => root().join("target"),
    }
}

/// Whether `name` is an executable on `$PATH` (checked without spawning anything).
pub fn have(name: &str) -> bool {
    which(name).is_some()
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The command line as a shell would show it.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; an error names the command and its exit status.
pub fn exec(cmd: &mut Command) -> Result {
    println!("$ {}", show(cmd));
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run '{}': {e}", show(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("'{}' failed ({status})", show(cmd)))
    }
}

/// Runs `cmd` quietly and returns its stdout if it succeeded.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether this process runs as root (read from /proc, no libc).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// `haproxy 2.6.12` for a HAProxy binary (`-v` says "2.6.12-1+deb12u4"): the drills' row label.
pub fn haproxy_label(bin: &Path) -> String {
    let v = output(Command::new(bin).arg("-v"))
        .and_then(|s| s.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_default();
    format!("haproxy {}", v.split('-').next().unwrap_or(""))
}
