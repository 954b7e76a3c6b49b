//! The VM test initramfs: busybox, the tracer and test binaries at the same
//! absolute paths as on the host (so `CARGO_BIN_EXE_tracer` resolves), their
//! shared libraries, vm/init.sh as /init and vm/suite.sh. Written as an
//! uncompressed newc cpio archive (no root, no cpio tool; nothing to inflate
//! under TCG).
use std::{
    collections::BTreeMap,
    fs,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::cmd;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

enum Node {
    Dir,
    /// Host file (followed through symlinks) to copy, with its mode.
    File(PathBuf, u32),
    Data(Vec<u8>, u32),
    Symlink(String),
    CharDev(u32, u32),
}

#[derive(Default)]
pub(crate) struct Initramfs {
    /// Archive path (no leading `/`) -> node; sorted, so parents come first.
    nodes: BTreeMap<String, Node>,
}

impl Initramfs {
    /// What every guest's image starts from: busybox (`run` runs it here, to
    /// list its applets), the mount points /init uses, and root's passwd and
    /// group entries.
    pub(crate) fn base(busybox: &Path, run: Command) -> Result<Initramfs> {
        let mut img = Initramfs::default();
        img.busybox(busybox, run)?;
        for dir in ["proc", "sys", "dev", "tmp", "root", "run", "etc", "mnt"] {
            img.dir(dir);
        }
        img.data("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644);
        img.data("etc/group", "root:x:0:\n", 0o644);
        Ok(img)
    }

    fn add(&mut self, path: &str, node: Node) {
        let path = path.trim_start_matches('/').to_string();
        let mut parent = Path::new(&path).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            self.nodes
                .entry(dir.to_string_lossy().into_owned())
                .or_insert(Node::Dir);
            parent = dir.parent();
        }
        self.nodes.insert(path, node);
    }

    pub(crate) fn dir(&mut self, path: &str) {
        self.add(path, Node::Dir);
    }

    pub(crate) fn data(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        self.add(path, Node::Data(data.into(), mode));
    }

    /// A host file at `at` whose content comes from `from` (e.g. a stripped copy).
    pub(crate) fn elf_from(&mut self, at: &Path, from: &Path) -> Result<()> {
        self.add(&at.to_string_lossy(), Node::File(from.into(), 0o755));
        self.libraries(from)
    }

    /// Shared libraries and the dynamic loader, from `ldd`, at their host paths.
    fn libraries(&mut self, elf: &Path) -> Result<()> {
        let out = Command::new("ldd")
            .arg(elf)
            .output()
            .context("running ldd")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || text.contains("not a dynamic executable") {
            return Ok(()); // static
        }
        for line in text.lines() {
            if line.contains("not found") {
                bail!("{}: {}", elf.display(), line.trim());
            }
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            if let Some(path) = path.filter(|p| p.starts_with('/')) {
                self.add(path, Node::File(path.into(), 0o755));
            }
        }
        Ok(())
    }

    /// busybox at /bin/busybox and a symlink for each applet it lists
    /// (`run` runs it here: itself, or under qemu's user-mode emulator).
    pub(crate) fn busybox(&mut self, busybox: &Path, mut run: Command) -> Result<()> {
        self.add("bin/busybox", Node::File(busybox.into(), 0o755));
        self.libraries(busybox)?;
        let out = cmd::output(run.arg("--list-full"))?;
        if !out.status.success() {
            bail!("{} --list-full failed", busybox.display());
        }
        for applet in String::from_utf8_lossy(&out.stdout).lines() {
            let applet = applet.trim().trim_start_matches('/');
            if !applet.is_empty() && applet != "bin/busybox" {
                self.add(applet, Node::Symlink("/bin/busybox".into()));
            }
        }
        // The console must exist before devtmpfs is mounted, for init's stdio.
        self.add("dev/console", Node::CharDev(5, 1));
        self.add("dev/null", Node::CharDev(1, 3));
        Ok(())
    }

    pub(crate) fn write(&self, out: &Path) -> Result<u64> {
        let tmp = out.with_extension("partial");
        let file = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = Cpio {
            out: BufWriter::new(file),
            ino: 1,
            written: 0,
        };
        for (path, node) in &self.nodes {
            match node {
                Node::Dir => w.entry(path, S_IFDIR | 0o755, (0, 0), &[])?,
                Node::Data(data, mode) => w.entry(path, S_IFREG | mode, (0, 0), data)?,
                Node::File(from, mode) => {
                    let data =
                        fs::read(from).with_context(|| format!("reading {}", from.display()))?;
                    w.entry(path, S_IFREG | mode, (0, 0), &data)?
                }
                Node::Symlink(target) => {
                    w.entry(path, S_IFLNK | 0o777, (0, 0), target.as_bytes())?
                }
                Node::CharDev(major, minor) => {
                    w.entry(path, S_IFCHR | 0o600, (*major, *minor), &[])?
                }
            }
        }
        w.entry("TRAILER!!!", 0, (0, 0), &[])?;
        w.out.flush()?;
        let written = w.written;
        drop(w);
        fs::rename(&tmp, out)?;
        Ok(written)
    }
}

/// `strip --strip-debug` into `dir` (test binaries shrink ~10x); a plain
/// copy when strip is missing. `strip`: the program for the binary's
/// architecture (`aarch64-linux-gnu-strip`: this machine's strip does not
/// read arm64 ELF files).
pub(crate) fn stripped(bin: &Path, dir: &Path, strip: &str) -> Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let out = dir.join(bin.file_name().context("binary without a name")?);
    let mut strip = Command::new(strip);
    strip.arg("--strip-debug").arg("-o").arg(&out).arg(bin);
    if cmd::output(&mut strip)
        .map(|o| o.status.success())
        .unwrap_or(false)
    {
        return Ok(out);
    }
    fs::copy(bin, &out)?;
    Ok(out)
}

struct Cpio<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Cpio<W> {
    /// One newc entry: header, NUL-terminated name and data, each padded to 4 bytes.
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> Result<()> {
        let nlink = if mode & S_IFDIR == S_IFDIR { 2 } else { 1 };
        let ino = if mode == 0 { 0 } else { self.ino };
        self.ino += 1;
        let fields = [
            ino,
            mode,
            0,
            0,
            nlink,
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        let mut header = String::from("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> Result<()> {
        let n = (4 - self.written % 4) % 4;
        self.put(&[0; 3][..n as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_first_and_padded() {
        let mut img = Initramfs::default();
        img.data("/a/b/c", "x", 0o644);
        let names: Vec<_> = img.nodes.keys().cloned().collect();
        assert_eq!(names, ["a", "a/b", "a/b/c"]);
        let mut w = Cpio {
            out: Vec::new(),
            ino: 1,
            written: 0,
        };
        w.entry("ab", S_IFREG | 0o644, (0, 0), b"hello").unwrap();
        // 110-byte header + "ab\0" = 113 -> 116; 5 data bytes -> 124.
        assert_eq!(w.out.len(), 124);
        assert!(w.out.starts_with(b"070701"));
    }
}
