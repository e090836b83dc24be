//! `cargo xtask deb`: the Debian package, laid out as Debian's haproxy package is.
//!
//! Built with `dpkg-deb` from a staging tree under `target/deb/`: the release binary (stripped),
//! the stock configuration, error pages, systemd unit, defaults file, logrotate and rsyslog
//! snippets from `contrib/`, the man page and docs from `docs/`. Every file under `/etc` is a
//! conffile.
//!
//! - `--check` then reads the package back (`dpkg-deb -c`, `-f`, `-x` into a temporary root):
//!   every expected path with its mode, the conffiles, the stock configuration valid with
//!   `portcullis -c`, the man page rendered by `man -l`, `lintian` when installed.
//! - `--install-test` (root, on a machine without the package) also installs it with `dpkg -i`,
//!   verifies the unit (`systemd-analyze verify`), runs the packaged configuration (started as
//!   root, it must end up chrooted and running as the `portcullis` user) until its admin socket
//!   answers, then `dpkg -r` and `dpkg -P` and checks that nothing is left.

use crate::util::{Result, exec, have, is_root, output, root, show, target_dir};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NAME: &str = "portcullis";
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One file of the package: where it comes from, where it goes, its mode.
#[derive(Debug, Clone)]
pub struct Entry {
    pub src: Src,
    pub dest: String,
    pub mode: u32,
}

#[derive(Debug, Clone)]
pub enum Src {
    /// A file of the repository, copied as is.
    File(String),
    /// A file of the repository, compressed with `gzip -9n`.
    Gzip(String),
    /// The release binary, stripped.
    Binary,
    /// Generated at build time (changelog, copyright).
    Generated(fn(&Meta) -> String, bool),
}

/// What the generated files need to know.
pub struct Meta {
    pub version: String,
    pub maintainer: String,
    /// RFC 2822, from the last commit (so a rebuild of one commit is identical).
    pub date: String,
    pub commit: String,
}

const ERROR_PAGES: &[&str] = &["400", "403", "408", "500", "502", "503", "504"];

/// Everything the package holds, besides the error pages (see [`entries`]).
fn fixed_entries() -> Vec<Entry> {
    use Src::*;
    let f = |p: &str| File(p.to_string());
    let g = |p: &str| Gzip(p.to_string());
    vec![
        e(Binary, "usr/sbin/portcullis", 0o755),
        e(
            f("contrib/portcullis.cfg"),
            "etc/portcullis/portcullis.cfg",
            0o644,
        ),
        e(
            f("contrib/default/portcullis"),
            "etc/default/portcullis",
            0o644,
        ),
        e(
            f("contrib/logrotate/portcullis"),
            "etc/logrotate.d/portcullis",
            0o644,
        ),
        e(
            f("contrib/rsyslog/49-portcullis.conf"),
            "etc/rsyslog.d/49-portcullis.conf",
            0o644,
        ),
        e(
            f("contrib/portcullis.service"),
            "lib/systemd/system/portcullis.service",
            0o644,
        ),
        e(
            g("docs/portcullis.1"),
            "usr/share/man/man1/portcullis.1.gz",
            0o644,
        ),
        e(f("README.md"), "usr/share/doc/portcullis/README.md", 0o644),
        e(
            g("docs/compatibility.md"),
            "usr/share/doc/portcullis/compatibility.md.gz",
            0o644,
        ),
        e(
            g("docs/operations.md"),
            "usr/share/doc/portcullis/operations.md.gz",
            0o644,
        ),
        e(
            g("docs/extensions.md"),
            "usr/share/doc/portcullis/extensions.md.gz",
            0o644,
        ),
        e(
            Generated(changelog, true),
            "usr/share/doc/portcullis/changelog.gz",
            0o644,
        ),
        e(
            Generated(copyright, false),
            "usr/share/doc/portcullis/copyright",
            0o644,
        ),
    ]
}

fn e(src: Src, dest: impl Into<String>, mode: u32) -> Entry {
    Entry {
        src,
        dest: dest.into(),
        mode,
    }
}

pub fn entries() -> Vec<Entry> {
    let mut v = fixed_entries();
    for code in ERROR_PAGES {
        v.push(e(
            Src::File(format!("contrib/errors/{code}.http")),
            format!("etc/portcullis/errors/{code}.http"),
            0o644,
        ));
    }
    v
}

/// The conffiles: every file under /etc, as Debian's haproxy marks them.
pub fn conffiles(entries: &[Entry]) -> Vec<String> {
    let mut v: Vec<String> = entries
        .iter()
        .filter(|e| e.dest.starts_with("etc/"))
        .map(|e| format!("/{}", e.dest))
        .collect();
    v.sort();
    v
}

fn changelog(m: &Meta) -> String {
    format!(
        "{NAME} ({v}) unstable; urgency=medium\n\n  * Built by `cargo xtask deb` from commit {c}.\n\n -- {who}  {date}\n",
        v = m.version,
        c = m.commit,
        who = m.maintainer,
        date = m.date
    )
}

fn copyright(m: &Meta) -> String {
    format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: {NAME}\n\n\
         Files: *\n\
         Copyright: {year} the {NAME} authors ({who})\n\
         License: Apache-2.0\n \
         On Debian systems the full text of the Apache License 2.0 is in\n \
         /usr/share/common-licenses/Apache-2.0.\n",
        who = m.maintainer,
        // The year of the build's commit date ("Tue, 1 Dec 2026 21:00:00 +0000").
        year = m.date.split_whitespace().nth(3).unwrap_or("2026"),
    )
}

/// `Depends:` from the binary's NEEDED libraries (libc's from the newest GLIBC_ symbol
/// version it references). An unknown library is an error, not a missing dependency.
pub fn depends(needed: &[String], glibc: &str) -> Result<String> {
    let mut deps = vec!["adduser".to_string()];
    for lib in needed {
        match lib.as_str() {
            "libc.so.6" => deps.push(format!("libc6 (>= {glibc})")),
            "libgcc_s.so.1" => deps.push("libgcc-s1 (>= 4.2)".into()),
            // crypt(3) for userlist passwords.
            "libcrypt.so.1" => deps.push("libcrypt1 (>= 1:4.1.0)".into()),
            // Part of libc6.
            "ld-linux-x86-64.so.2" | "libm.so.6" | "libpthread.so.0" | "libdl.so.2" => {}
            other => return Err(format!("no package known for shared library {other}")),
        }
    }
    deps.sort();
    Ok(deps.join(", "))
}

/// The NEEDED entries and the newest `GLIBC_x.y` version of `bin`, from `objdump`.
fn linkage(bin: &Path) -> Result<(Vec<String>, String)> {
    let p = output(Command::new("objdump").arg("-p").arg(bin))
        .ok_or("objdump -p failed (install binutils)")?;
    let needed = p
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|s| s.trim().to_string())
        .collect();
    let t = output(Command::new("objdump").arg("-T").arg(bin)).ok_or("objdump -T failed")?;
    let glibc = t
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut it = v.split('.').map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(0)))
        })
        .max()
        .map(|(a, b)| format!("{a}.{b}"))
        .ok_or("no GLIBC_ symbol version in the binary")?;
    Ok((needed, glibc))
}

pub fn control(meta: &Meta, arch: &str, depends: &str, installed_kib: u64) -> String {
    format!(
        "Package: {NAME}
Version: {v}
Architecture: {arch}
Maintainer: {who}
Installed-Size: {installed_kib}
Depends: {depends}
Suggests: rsyslog, logrotate
Section: net
Priority: optional
Description: HAProxy-compatible load balancer (io_uring, rustls, eBPF)
 portcullis reads HAProxy's configuration language, writes HAProxy's log
 lines and answers HAProxy's admin-socket commands with the same bytes, so an
 HAProxy setup can swap the binary and keep its configuration, scripts and
 dashboards. It runs one thread per core on io_uring (epoll as a fallback),
 terminates TLS with rustls, and can splice TCP sessions and filter SYN
 floods in the kernel with eBPF.
 .
 This package installs it as Debian installs haproxy: /etc/portcullis,
 a systemd unit in master-worker mode with hitless reload, logrotate and
 rsyslog snippets and the portcullis(1) manual page.
",
        v = meta.version,
        who = meta.maintainer,
    )
}

struct Opts {
    binary: Option<PathBuf>,
    check: bool,
    install_test: bool,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        binary: None,
        check: false,
        install_test: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--binary" => {
                o.binary = Some(PathBuf::from(it.next().ok_or("--binary needs a path")?));
            }
            "--check" => o.check = true,
            "--install-test" => {
                o.check = true;
                o.install_test = true;
            }
            other => {
                return Err(format!(
                    "unknown option '{other}' (deb [--binary <path>] [--check] [--install-test])"
                ));
            }
        }
    }
    Ok(o)
}

/// What `cargo xtask test` runs: build and check the package; as root, on a machine without
/// it, also install, run and purge it.
pub fn ci() -> Result {
    let deb = build(None)?;
    check(&deb)?;
    let installed = output(Command::new("dpkg-query").args(["-W", "-f=${Status}", NAME]))
        .is_some_and(|s| s.contains(" installed"));
    if is_root() && !installed && !Path::new("/etc/portcullis").exists() {
        install_test(&deb)
    } else {
        println!("install test skipped (needs root and a machine without the package)");
        Ok(())
    }
}

pub fn run(args: &[String]) -> Result {
    let o = parse(args)?;
    let deb = build(o.binary.as_deref())?;
    if o.check {
        check(&deb)?;
    }
    if o.install_test {
        install_test(&deb)?;
    }
    Ok(())
}

fn git(args: &[&str]) -> Option<String> {
    output(Command::new("git").args(args).current_dir(root())).map(|s| s.trim().to_string())
}

fn meta() -> Meta {
    let name = git(&["log", "-1", "--format=%an"]).unwrap_or_else(|| "portcullis".into());
    let mail = git(&["log", "-1", "--format=%ae"]).unwrap_or_else(|| "root@localhost".into());
    Meta {
        version: VERSION.to_string(),
        maintainer: format!("{name} <{mail}>"),
        date: git(&["log", "-1", "--format=%aD"])
            .unwrap_or_else(|| "Thu, 01 Jan 1970 00:00:00 +0000".into()),
        commit: git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into()),
    }
}

/// Builds the package; returns its path.
fn build(binary: Option<&Path>) -> Result<PathBuf> {
    for tool in ["dpkg-deb", "strip", "objdump", "gzip"] {
        if !have(tool) {
            return Err(format!(
                "'{tool}' is needed (apt-get install dpkg binutils gzip)"
            ));
        }
    }
    let bin = match binary {
        Some(b) => b.to_path_buf(),
        None => {
            exec(nested_cargo().args(["build", "--release", "-p", NAME]))?;
            target_dir().join("release").join(NAME)
        }
    };
    let arch = output(Command::new("dpkg").arg("--print-architecture"))
        .map(|s| s.trim().to_string())
        .ok_or("dpkg --print-architecture failed")?;
    let meta = meta();
    let out_dir = target_dir().join("deb");
    let stage = out_dir.join(format!("{NAME}_{VERSION}_{arch}"));
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
    }
    let list = entries();
    let mut installed: u64 = 0;
    for en in &list {
        let dest = stage.join(&en.dest);
        let dir = dest.parent().ok_or("entry without a directory")?;
        mkdir(dir)?;
        match &en.src {
            Src::File(p) => copy(&root().join(p), &dest)?,
            Src::Gzip(p) => gzip_file(&root().join(p), &dest)?,
            Src::Binary => {
                exec(
                    Command::new("strip")
                        .args(["--strip-unneeded", "--remove-section=.comment"])
                        .arg("-o")
                        .arg(&dest)
                        .arg(&bin),
                )?;
            }
            Src::Generated(f, gz) => {
                let text = f(&meta);
                if *gz {
                    gzip_bytes(text.as_bytes(), &dest)?;
                } else {
                    write(&dest, text.as_bytes())?;
                }
            }
        }
        set_mode(&dest, en.mode)?;
        installed += std::fs::metadata(&dest)
            .map(|m| m.len().div_ceil(1024))
            .unwrap_or(0);
    }
    let (needed, glibc) = linkage(&stage.join("usr/sbin/portcullis"))?;
    let deps = depends(&needed, &glibc)?;
    let debian = stage.join("DEBIAN");
    mkdir(&debian)?;
    write(
        &debian.join("control"),
        control(&meta, &arch, &deps, installed).as_bytes(),
    )?;
    let mut conf = conffiles(&list).join("\n");
    conf.push('\n');
    write(&debian.join("conffiles"), conf.as_bytes())?;
    write(&debian.join("md5sums"), md5sums(&stage, &list)?.as_bytes())?;
    for script in ["postinst", "prerm", "postrm"] {
        let dest = debian.join(script);
        copy(&root().join("contrib/debian").join(script), &dest)?;
        set_mode(&dest, 0o755)?;
    }
    // Directories are 0755 whatever the umask, as lintian wants.
    fix_dir_modes(&stage)?;
    let deb = out_dir.join(format!("{NAME}_{VERSION}_{arch}.deb"));
    exec(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&stage)
            .arg(&deb)
            .env(
                "SOURCE_DATE_EPOCH",
                git(&["log", "-1", "--format=%ct"]).unwrap_or_else(|| "0".into()),
            ),
    )?;
    println!("built {}", deb.display());
    Ok(deb)
}

/// `cargo` for a nested build, without the variables `cargo run` set for xtask itself
/// (`CARGO_PKG_*`, `CARGO_MANIFEST_*`, …): build scripts such as ring's rerun when those change,
/// so inheriting them rebuilds what `cargo build --release` in a shell has built, and back.
fn nested_cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*k)
        {
            c.env_remove(&*k);
        }
    }
    c
}

fn mkdir(d: &Path) -> Result {
    std::fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))
}

fn copy(src: &Path, dest: &Path) -> Result {
    std::fs::copy(src, dest)
        .map(|_| ())
        .map_err(|e| format!("copy {} → {}: {e}", src.display(), dest.display()))
}

fn write(dest: &Path, bytes: &[u8]) -> Result {
    std::fs::write(dest, bytes).map_err(|e| format!("write {}: {e}", dest.display()))
}

fn set_mode(p: &Path, mode: u32) -> Result {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", p.display()))
}

fn fix_dir_modes(d: &Path) -> Result {
    set_mode(d, 0o755)?;
    let rd = std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
    for ent in rd.flatten() {
        if ent.file_type().is_ok_and(|t| t.is_dir()) {
            fix_dir_modes(&ent.path())?;
        }
    }
    Ok(())
}

/// `gzip -9n`: no name or timestamp in the header, so the output depends on the input only.
fn gzip_bytes(bytes: &[u8], dest: &Path) -> Result {
    use std::io::Write;
    let f = std::fs::File::create(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let mut child = Command::new("gzip")
        .args(["-9n", "-c"])
        .stdin(Stdio::piped())
        .stdout(f)
        .spawn()
        .map_err(|e| format!("gzip: {e}"))?;
    child
        .stdin
        .take()
        .ok_or("gzip: no stdin")?
        .write_all(bytes)
        .map_err(|e| format!("gzip: {e}"))?;
    let st = child.wait().map_err(|e| format!("gzip: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("gzip failed ({st})"))
    }
}

fn gzip_file(src: &Path, dest: &Path) -> Result {
    let bytes = std::fs::read(src).map_err(|e| format!("{}: {e}", src.display()))?;
    gzip_bytes(&bytes, dest)
}

fn md5sums(stage: &Path, list: &[Entry]) -> Result<String> {
    let mut cmd = Command::new("md5sum");
    cmd.current_dir(stage);
    // conffiles are not listed, as dh_md5sums does.
    for en in list.iter().filter(|e| !e.dest.starts_with("etc/")) {
        cmd.arg(&en.dest);
    }
    output(&mut cmd).ok_or_else(|| format!("'{}' failed", show(&cmd)))
}

/// The tar listing's (mode, path) pairs, from `dpkg-deb -c` lines such as
/// `-rwxr-xr-x root/root 123 2026-12-01 21:00 ./usr/sbin/portcullis`.
pub fn parse_listing(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let mode = w.next()?.to_string();
            let owner = w.next()?;
            let path = w.nth(3)?;
            (owner == "root/root").then(|| (mode, path.trim_start_matches("./").to_string()))
        })
        .collect()
}

fn mode_string(mode: u32) -> String {
    let mut s = String::from("-");
    for shift in [6, 3, 0] {
        let m = (mode >> shift) & 7;
        s.push(if m & 4 != 0 { 'r' } else { '-' });
        s.push(if m & 2 != 0 { 'w' } else { '-' });
        s.push(if m & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// What is wrong with a listing: every entry present with its mode and owned by root.
pub fn listing_problems(list: &[Entry], listing: &[(String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for en in list {
        match listing.iter().find(|(_, p)| *p == en.dest) {
            None => bad.push(format!("missing /{}", en.dest)),
            Some((m, _)) if *m != mode_string(en.mode) => bad.push(format!(
                "/{} has mode {m}, want {}",
                en.dest,
                mode_string(en.mode)
            )),
            Some(_) => {}
        }
    }
    bad
}

fn check(deb: &Path) -> Result {
    println!("==> checking {}", deb.display());
    let list = entries();
    let text = output(Command::new("dpkg-deb").arg("-c").arg(deb)).ok_or("dpkg-deb -c failed")?;
    let problems = listing_problems(&list, &parse_listing(&text));
    if !problems.is_empty() {
        return Err(format!("package contents: {}", problems.join("; ")));
    }
    let tmp = target_dir().join("deb").join("check-root");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    }
    mkdir(&tmp)?;
    let res = check_extracted(deb, &tmp, &list);
    let _ = std::fs::remove_dir_all(&tmp);
    res?;
    if have("lintian") {
        // Errors fail the check; warnings are printed for the reader.
        exec(
            Command::new("lintian")
                .args(["--fail-on", "error"])
                .arg(deb),
        )?;
    } else {
        println!("lintian not installed: skipped (apt-get install lintian)");
    }
    println!("package check passed");
    Ok(())
}

fn check_extracted(deb: &Path, tmp: &Path, list: &[Entry]) -> Result {
    let ctl = tmp.join("DEBIAN");
    exec(Command::new("dpkg-deb").arg("-e").arg(deb).arg(&ctl))?;
    exec(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tmp))?;
    let conf = std::fs::read_to_string(ctl.join("conffiles")).map_err(|e| e.to_string())?;
    let got: Vec<&str> = conf.lines().collect();
    let want = conffiles(list);
    if got != want {
        return Err(format!("conffiles {got:?}, want {want:?}"));
    }
    let field = |f: &str| {
        output(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg(f))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    if field("Package") != NAME || field("Version") != VERSION {
        return Err("control: wrong Package or Version".into());
    }
    // The stock configuration with the shipped binary, before anything is installed: its
    // /etc/portcullis paths (error pages) moved into the extracted tree and, on a machine
    // without the portcullis user, its user/group lines left out (`-c` resolves them). The
    // file itself, unchanged, is checked by the install test once dpkg has put it in place.
    let bin = tmp.join("usr/sbin/portcullis");
    let stock = std::fs::read_to_string(tmp.join("etc/portcullis/portcullis.cfg"))
        .map_err(|e| format!("stock configuration: {e}"))?;
    let cfg = tmp.join("check.cfg");
    write(&cfg, check_copy(&stock, tmp, user_exists()).as_bytes())?;
    let out = Command::new(&bin)
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains("Configuration file is valid") {
        return Err(format!(
            "portcullis -c on the stock configuration: {} {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    println!("stock configuration: {}", stdout.trim());
    let v = output(Command::new(&bin).arg("-v")).unwrap_or_default();
    if !v.contains(VERSION) {
        return Err(format!("portcullis -v says '{}', want {VERSION}", v.trim()));
    }
    if have("man") {
        let page = tmp.join("usr/share/man/man1/portcullis.1.gz");
        let text = output(
            Command::new("man")
                .arg("-l")
                .arg(&page)
                // Plain text: man-db keeps the overstrikes when this is set at all.
                .env("MANWIDTH", "80")
                .env_remove("MAN_KEEP_FORMATTING"),
        )
        .ok_or("man -l failed on the man page")?;
        for must in [
            "SYNOPSIS",
            "OPTIONS",
            "SIGNALS",
            "EXIT STATUS",
            "FILES",
            "ENVIRONMENT",
        ] {
            if !text.contains(must) {
                return Err(format!("the man page has no {must} section"));
            }
        }
        println!("man page renders ({} lines)", text.lines().count());
    }
    Ok(())
}

fn user_exists() -> bool {
    output(Command::new("getent").args(["passwd", NAME])).is_some()
}

/// The stock configuration as `--check` can verify it before installing: see
/// [`check_extracted`].
pub fn check_copy(stock: &str, root: &Path, have_user: bool) -> String {
    let prefix = format!("{}/etc/portcullis/", root.display());
    stock
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            if !have_user && matches!(words.first(), Some(&"user") | Some(&"group")) {
                format!("# (check: no {NAME} user here) {l}")
            } else {
                l.replace("/etc/portcullis/", &prefix)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Installs, runs and removes the package on this machine. Refuses when the package or its
/// files are already there: the test must leave the machine as it found it.
fn install_test(deb: &Path) -> Result {
    if !is_root() {
        return Err("--install-test needs root (dpkg -i)".into());
    }
    let installed = output(Command::new("dpkg-query").args(["-W", "-f=${Status}", NAME]))
        .is_some_and(|s| s.contains("installed") && !s.contains("not-installed"));
    if installed || Path::new("/etc/portcullis").exists() {
        return Err(
            "portcullis is already installed here (or /etc/portcullis exists): not touching it"
                .into(),
        );
    }
    let had_user = output(Command::new("getent").args(["passwd", NAME])).is_some();
    println!("==> install test");
    let res = install_and_run(deb);
    // Whatever happened: purge, then check what is left.
    let purge = exec(Command::new("dpkg").args(["--purge", NAME]));
    res?;
    purge?;
    let mut left = Vec::new();
    for p in [
        "/usr/sbin/portcullis",
        "/etc/portcullis",
        "/lib/systemd/system/portcullis.service",
        "/etc/default/portcullis",
        "/etc/logrotate.d/portcullis",
        "/etc/rsyslog.d/49-portcullis.conf",
        "/usr/share/man/man1/portcullis.1.gz",
        "/usr/share/doc/portcullis",
        "/var/lib/portcullis",
    ] {
        if Path::new(p).exists() {
            left.push(p);
        }
    }
    if Path::new("/etc/systemd/system/multi-user.target.wants/portcullis.service").exists() {
        left.push("the unit's multi-user.target.wants link");
    }
    if !had_user && output(Command::new("getent").args(["passwd", NAME])).is_some() {
        left.push("the portcullis user");
    }
    if !had_user && output(Command::new("getent").args(["group", NAME])).is_some() {
        left.push("the portcullis group");
    }
    if !left.is_empty() {
        return Err(format!("left after dpkg --purge: {}", left.join(", ")));
    }
    println!("install test passed: installed, ran as portcullis, removed cleanly");
    Ok(())
}

fn install_and_run(deb: &Path) -> Result {
    exec(Command::new("dpkg").arg("-i").arg(deb))?;
    let uid = output(Command::new("id").args(["-u", NAME]))
        .ok_or("postinst did not create the portcullis user")?;
    println!("portcullis user: uid {}", uid.trim());
    exec(Command::new("/usr/sbin/portcullis").args([
        "-c",
        "-f",
        "/etc/portcullis/portcullis.cfg",
    ]))?;
    if have("systemd-analyze") {
        // --man=no: the unit's man: link is checked by `man -l` already.
        exec(Command::new("systemd-analyze").args([
            "verify",
            "--man=no",
            "/lib/systemd/system/portcullis.service",
        ]))?;
    }
    run_as_user()?;
    exec(Command::new("dpkg").args(["-r", NAME]))?;
    // Removed, not purged: the conffiles stay, the binary goes.
    if Path::new("/usr/sbin/portcullis").exists() {
        return Err("dpkg -r left /usr/sbin/portcullis".into());
    }
    if !Path::new("/etc/portcullis/portcullis.cfg").exists() {
        return Err("dpkg -r removed a conffile".into());
    }
    Ok(())
}

/// Runs the packaged configuration in the foreground as the unit would (started as root, in
/// the unit's `RuntimeDirectory=`): it must open its admin socket, then chroot and run as the
/// `portcullis` user, until `show info` on that socket answers.
fn run_as_user() -> Result {
    let run = Path::new("/run/portcullis");
    let made_run = !run.exists();
    mkdir(run)?;
    let mut child = Command::new("/usr/sbin/portcullis")
        .args(["-db", "-f", "/etc/portcullis/portcullis.cfg"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("/usr/sbin/portcullis: {e}"))?;
    let res = wait_show_info(child.id());
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    if made_run {
        let _ = std::fs::remove_dir_all(run);
    }
    res
}

fn wait_show_info(pid: u32) -> Result {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect("/run/portcullis/admin.sock") {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            s.write_all(b"show info\n").map_err(|e| e.to_string())?;
            let mut reply = String::new();
            let _ = s.read_to_string(&mut reply);
            let mut info = String::new();
            for l in reply
                .lines()
                .filter(|l| l.starts_with("Pid:") || l.starts_with("Uptime:"))
            {
                let _ = write!(info, "{l}; ");
            }
            if !reply.contains(&format!("Pid: {pid}")) {
                return Err(format!("show info did not name pid {pid}: {reply}"));
            }
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
            let want = output(Command::new("id").args(["-u", NAME])).unwrap_or_default();
            if uid_line.split_whitespace().nth(1) != Some(want.trim()) {
                return Err(format!("the process runs as '{uid_line}', not portcullis"));
            }
            let root = std::fs::read_link(format!("/proc/{pid}/root")).unwrap_or_default();
            if root != Path::new("/var/lib/portcullis") {
                return Err(format!(
                    "the process' root is {}, not the chroot",
                    root.display()
                ));
            }
            println!(
                "running as portcullis ({uid_line}), chrooted in {}: {info}",
                root.display()
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the packaged configuration did not open its admin socket in 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_etc_file_is_a_conffile() {
        let c = conffiles(&entries());
        assert!(c.contains(&"/etc/portcullis/portcullis.cfg".to_string()));
        assert!(c.contains(&"/etc/portcullis/errors/503.http".to_string()));
        assert_eq!(c.len(), 4 + ERROR_PAGES.len());
        assert!(c.iter().all(|p| p.starts_with("/etc/")));
    }

    #[test]
    fn every_source_file_exists() {
        for en in entries() {
            if let Src::File(p) | Src::Gzip(p) = &en.src {
                assert!(root().join(p).is_file(), "{p} is missing");
            }
        }
    }

    #[test]
    fn listing_is_checked_by_path_and_mode() {
        let text = "drwxr-xr-x root/root         0 2026-12-01 21:00 ./usr/sbin/\n\
                    -rwxr-xr-x root/root   1234567 2026-12-01 21:00 ./usr/sbin/portcullis\n\
                    -rw-r--r-- root/root       300 2026-12-01 21:00 ./etc/default/portcullis\n";
        let l = parse_listing(text);
        assert_eq!(l[1], ("-rwxr-xr-x".into(), "usr/sbin/portcullis".into()));
        let list = vec![
            e(Src::Binary, "usr/sbin/portcullis", 0o755),
            e(Src::File("x".into()), "etc/default/portcullis", 0o600),
            e(
                Src::File("y".into()),
                "etc/portcullis/portcullis.cfg",
                0o644,
            ),
        ];
        assert_eq!(
            listing_problems(&list, &l),
            vec![
                "/etc/default/portcullis has mode -rw-r--r--, want -rw-------".to_string(),
                "missing /etc/portcullis/portcullis.cfg".to_string(),
            ]
        );
    }

    #[test]
    fn check_copy_moves_paths_and_drops_user_lines_without_the_user() {
        let stock = "global\n\tuser portcullis\n\tgroup portcullis\ndefaults\n\terrorfile 503 /etc/portcullis/errors/503.http\n";
        let c = check_copy(stock, Path::new("/tmp/x"), false);
        assert_eq!(
            c,
            "global\n# (check: no portcullis user here) \tuser portcullis\n# (check: no portcullis user here) \tgroup portcullis\ndefaults\n\terrorfile 503 /tmp/x/etc/portcullis/errors/503.http\n"
        );
        assert!(check_copy(stock, Path::new("/tmp/x"), true).contains("\tuser portcullis\n"));
    }

    #[test]
    fn depends_from_linkage() {
        let needed = ["libgcc_s.so.1", "libc.so.6", "ld-linux-x86-64.so.2"].map(String::from);
        assert_eq!(
            depends(&needed, "2.34").unwrap(),
            "adduser, libc6 (>= 2.34), libgcc-s1 (>= 4.2)"
        );
        assert_eq!(
            depends(&["libcrypt.so.1".into()], "2.34").unwrap(),
            "adduser, libcrypt1 (>= 1:4.1.0)"
        );
        assert!(depends(&["libssl.so.3".into()], "2.34").is_err());
    }
}
