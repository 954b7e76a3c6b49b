//! Debian kernels for `cargo xtask vm-test`: fetched with apt using its own
//! sources list, lists and cache under target/vm/ (the machine's apt state is
//! untouched), then vmlinuz and the config extracted from the .deb.
//!
//! The mirror is the machine's own Debian mirror, read from its apt
//! configuration at run time, with another suite.
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use crate::cmd;

/// Kernel version -> Debian suites that ship it, tried in order.
pub(crate) const KNOWN: &[(&str, &[&str])] = &[
    ("5.10", &["bullseye"]),
    ("6.1", &["bookworm"]),
    ("6.12", &["trixie", "bookworm-backports"]),
];

/// Suites a Debian mirror entry names (security and updates suites are other archives).
const DEBIAN_SUITES: &[&str] = &[
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "sid",
    "oldstable",
    "stable",
    "testing",
    "unstable",
];

pub(crate) struct Kernel {
    /// What the user asked for: "6.1", or a path.
    pub label: String,
    /// Where it came from: "bookworm", or "file".
    pub origin: String,
    pub vmlinuz: PathBuf,
    pub config: Option<PathBuf>,
}

impl Kernel {
    /// `CONFIG_NAME`'s value in the kernel's config: `Some("n")` when "is not
    /// set", `None` when the option does not exist or there is no config.
    pub(crate) fn config_value(&self, name: &str) -> Option<String> {
        let text = fs::read_to_string(self.config.as_ref()?).ok()?;
        let (set, unset) = (format!("{name}="), format!("# {name} is not set"));
        text.lines().find_map(|l| match l.strip_prefix(&set) {
            Some(value) => Some(value.to_string()),
            None => (l == unset).then(|| "n".to_string()),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mirror {
    pub uri: String,
    pub signed_by: Option<String>,
}

/// `version` is a known version ("6.1") or the path of a kernel image.
/// `arch` is Debian's name of the architecture (`amd64`, `arm64`); its
/// kernels and apt state live under `vm_dir` (one per architecture).
pub(crate) fn get(
    vm_dir: &Path,
    version: &str,
    mirror: Option<&Mirror>,
    arch: &str,
) -> Result<Kernel> {
    if Path::new(version).is_file() {
        return Ok(Kernel {
            label: version.into(),
            origin: "file".into(),
            vmlinuz: PathBuf::from(version),
            config: None,
        });
    }
    let Some((_, suites)) = KNOWN.iter().find(|(v, _)| *v == version) else {
        let known: Vec<_> = KNOWN.iter().map(|(v, _)| *v).collect();
        bail!("unknown kernel {version}: use one of {known:?} or a kernel image path");
    };
    let mut errors = Vec::new();
    for suite in *suites {
        let dir = vm_dir.join("kernels").join(suite);
        if let Some(k) = extracted(&dir, version, suite)? {
            eprintln!("xtask: kernel {version}: cached {}", k.vmlinuz.display());
            return Ok(k);
        }
        let mirror = mirror.context("no Debian mirror (see --mirror)")?;
        match fetch(vm_dir, &dir, version, suite, mirror, arch) {
            Ok(()) => {
                if let Some(k) = extracted(&dir, version, suite)? {
                    return Ok(k);
                }
                errors.push(format!("{suite}: no boot/vmlinuz-* in the package"));
            }
            Err(e) => errors.push(format!("{suite}: {e:#}")),
        }
    }
    bail!("kernel {version} not found: {}", errors.join("; "))
}

/// The kernel already extracted under `dir`, if any.
fn extracted(dir: &Path, version: &str, suite: &str) -> Result<Option<Kernel>> {
    let boot = dir.join("boot");
    let Ok(entries) = fs::read_dir(&boot) else {
        return Ok(None);
    };
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(release) = name.strip_prefix("vmlinuz-") {
            let config = boot.join(format!("config-{release}"));
            return Ok(Some(Kernel {
                label: version.into(),
                origin: format!("{suite} {release}"),
                vmlinuz: boot.join(&name),
                config: config.is_file().then_some(config),
            }));
        }
    }
    Ok(None)
}

fn fetch(
    vm_dir: &Path,
    dir: &Path,
    version: &str,
    suite: &str,
    mirror: &Mirror,
    arch: &str,
) -> Result<()> {
    let apt = Apt::new(vm_dir, suite, mirror, arch)?;
    apt.update()?;
    let meta = format!("linux-image-{arch}");
    let out = cmd::output(apt.opts(&mut Command::new("apt-cache")).args([
        "show",
        "--no-all-versions",
        &meta,
    ]))?;
    if !out.status.success() {
        bail!("apt-cache show {meta} failed in {suite}");
    }
    let package = image_package(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("{meta} depends on no linux-image-* package"))?;
    if !package.starts_with(&format!("linux-image-{version}.")) {
        bail!("{suite} ships {package}, not {version}");
    }
    let deb = apt.download(&package)?;
    extract(&deb, dir, "./boot")
}

/// Debian's static busybox for `arch` (the VM's userland, when it is not
/// this machine's architecture), from `suite`: its `bin/busybox`, cached.
pub(crate) fn busybox(
    vm_dir: &Path,
    suite: &str,
    mirror: Option<&Mirror>,
    arch: &str,
) -> Result<PathBuf> {
    let dir = vm_dir.join("busybox").join(suite);
    let bin = dir.join("bin/busybox");
    if bin.is_file() {
        return Ok(bin);
    }
    let mirror = mirror.context("no Debian mirror for busybox-static (see --mirror)")?;
    let apt = Apt::new(vm_dir, suite, mirror, arch)?;
    apt.update()?;
    let deb = apt.download("busybox-static")?;
    extract(&deb, &dir, "./bin/busybox")?;
    crate::workspace::require_file(&bin, "busybox from busybox-static")?;
    Ok(bin)
}

/// A private apt state for one suite and architecture: its own sources
/// list, lists and cache under `vm_dir/apt/<suite>/` (the machine's apt
/// state is untouched; `APT::Architecture` picks the packages' architecture,
/// whatever this machine's is).
struct Apt {
    dir: PathBuf,
    list: PathBuf,
    arch: String,
}

impl Apt {
    fn new(vm_dir: &Path, suite: &str, mirror: &Mirror, arch: &str) -> Result<Self> {
        let dir = vm_dir.join("apt").join(suite);
        for sub in ["lists/partial", "cache/archives/partial", "debs"] {
            fs::create_dir_all(dir.join(sub))?;
        }
        let list = dir.join("sources.sources");
        fs::write(&list, sources_entry(mirror, suite))?;
        Ok(Self {
            dir,
            list,
            arch: arch.into(),
        })
    }

    fn opts<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.arg(format!("-oDir::Etc::SourceList={}", self.list.display()))
            .arg("-oDir::Etc::SourceParts=/dev/null")
            .arg(format!(
                "-oDir::State::Lists={}",
                self.dir.join("lists").display()
            ))
            .arg(format!("-oDir::Cache={}", self.dir.join("cache").display()))
            .arg(format!("-oAPT::Architecture={}", self.arch))
            .arg(format!("-oAPT::Architectures={}", self.arch))
            .arg("-oAPT::Sandbox::User=root");
        for target in ["DEP-11", "DEP-11-icons", "DEP-11-icons-small", "CNF"] {
            cmd.arg(format!(
                "-oAcquire::IndexTargets::deb::{target}::DefaultEnabled=false"
            ));
        }
        cmd
    }

    fn update(&self) -> Result<()> {
        cmd::run(
            self.opts(&mut Command::new("apt-get"))
                .args(["-q", "update"]),
        )
    }

    /// `apt-get download PACKAGE` into debs/: the .deb's path.
    fn download(&self, package: &str) -> Result<PathBuf> {
        let debs = self.dir.join("debs");
        cmd::run(
            self.opts(&mut Command::new("apt-get"))
                .current_dir(&debs)
                .args(["-q", "download", package]),
        )?;
        fs::read_dir(&debs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with(&format!("{package}_")) && name.ends_with(".deb")
            })
            .with_context(|| format!("{package}: no .deb after apt-get download"))
    }
}

/// `dpkg-deb --fsys-tarfile DEB | tar -x MEMBER` into `dir`: only what is
/// needed (`./boot`: vmlinuz, config, System.map; `./bin/busybox`).
fn extract(deb: &Path, dir: &Path, member: &str) -> Result<()> {
    let tmp = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let mut dpkg = Command::new("dpkg-deb");
    dpkg.arg("--fsys-tarfile").arg(deb).stdout(Stdio::piped());
    cmd::echo(&dpkg);
    let mut dpkg = dpkg.spawn().context("could not start dpkg-deb")?;
    let mut tar = Command::new("tar");
    tar.arg("-x").arg("-C").arg(&tmp).arg(member);
    tar.stdin(dpkg.stdout.take().context("dpkg-deb stdout")?);
    cmd::run(&mut tar)?;
    if !dpkg.wait()?.success() {
        bail!("dpkg-deb --fsys-tarfile {} failed", deb.display());
    }
    let _ = fs::remove_dir_all(dir);
    fs::rename(&tmp, dir)?;
    Ok(())
}

fn sources_entry(mirror: &Mirror, suite: &str) -> String {
    let mut s = format!(
        "Types: deb\nURIs: {}\nSuites: {suite}\nComponents: main\n",
        mirror.uri
    );
    if let Some(key) = &mirror.signed_by {
        s.push_str(&format!("Signed-By: {key}\n"));
    }
    s
}

/// The versioned image package `linux-image-<arch>` depends on.
fn image_package(show: &str) -> Option<String> {
    let deps = show.lines().find_map(|l| l.strip_prefix("Depends:"))?;
    deps.split([',', '|'])
        .map(|d| d.split_whitespace().next().unwrap_or(""))
        .find(|d| d.starts_with("linux-image-"))
        .map(str::to_string)
}

/// The machine's Debian mirror: the first `deb` entry in its apt sources that
/// names a plain Debian suite with the main component.
pub(crate) fn host_mirror() -> Result<Mirror> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        let found = match (ext, file.file_name().and_then(|n| n.to_str())) {
            ("sources", _) => parse_deb822(&text),
            ("list", _) | (_, Some("sources.list")) => parse_one_line(&text),
            _ => None,
        };
        if let Some(mirror) = found {
            return Ok(mirror);
        }
    }
    bail!("no Debian mirror in /etc/apt/sources.list{{,.d/}}: pass --mirror URI")
}

fn debian_entry(types: &str, uri: &str, suites: &str, comps: &str) -> bool {
    types.split_whitespace().any(|t| t == "deb")
        && !uri.is_empty()
        && suites
            .split_whitespace()
            .any(|s| DEBIAN_SUITES.contains(&s))
        && comps.split_whitespace().any(|c| c == "main")
}

fn parse_deb822(text: &str) -> Option<Mirror> {
    for stanza in text.split("\n\n") {
        let field = |name: &str| -> String {
            let prefix = format!("{name}:");
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        let (uris, enabled) = (field("URIs"), field("Enabled"));
        let uri = uris.split_whitespace().next().unwrap_or("");
        if enabled != "no"
            && debian_entry(&field("Types"), uri, &field("Suites"), &field("Components"))
        {
            let key = field("Signed-By");
            return Some(Mirror {
                uri: uri.to_string(),
                signed_by: (key.starts_with('/')).then_some(key),
            });
        }
    }
    None
}

fn parse_one_line(text: &str) -> Option<Mirror> {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((kind, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let (options, rest) = match rest.trim_start().strip_prefix('[') {
            Some(r) => r.split_once(']').unwrap_or(("", r)),
            None => ("", rest),
        };
        let mut words = rest.split_whitespace();
        let (uri, suite) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let comps: Vec<_> = words.collect();
        if debian_entry(kind, uri, suite, &comps.join(" ")) {
            let signed_by = options
                .split_whitespace()
                .find_map(|o| o.strip_prefix("signed-by="))
                .map(str::to_string);
            return Some(Mirror {
                uri: uri.to_string(),
                signed_by,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mirrors() {
        let deb822 =
            "Types: deb\nURIs: http://m.example/debian-security\nSuites: bookworm-security\n\
                      Components: main\n\nTypes: deb\nURIs: http://m.example/debian\n\
                      Suites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n";
        let want = Mirror {
            uri: "http://m.example/debian".into(),
            signed_by: Some("/k.gpg".into()),
        };
        assert_eq!(parse_deb822(deb822), Some(want.clone()));
        let list = "# c\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main\n";
        assert_eq!(parse_one_line(list), Some(want));
        assert_eq!(parse_one_line("deb http://x/ubuntu jammy main\n"), None);
    }

    #[test]
    fn finds_image_package() {
        let show =
            "Package: linux-image-amd64\nDepends: linux-image-6.1.0-50-amd64 (= 6.1.176-1)\n";
        assert_eq!(
            image_package(show).as_deref(),
            Some("linux-image-6.1.0-50-amd64")
        );
    }
}
