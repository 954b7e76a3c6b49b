//! The crash_stacks tests' crashers, built here for the VMs, which have no
//! compiler: the same list the tests build from where they run
//! (`tracer-user/tests/kernel/crash_stacks/crashers/builds.txt`), into a
//! directory the initramfs holds at [`IN_VM`] (`vm/init.sh` points
//! `TRACER_PREBUILT_CRASHERS` there).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{cmd, workspace::Workspace};

/// Where the initramfs holds them.
pub(crate) const IN_VM: &str = "crashers";

/// One line of builds.txt: the binary, its source, the flags, stripped?
#[derive(Debug, PartialEq)]
struct Build<'a> {
    name: &'a str,
    source: &'a str,
    flags: Vec<&'a str>,
    strip: bool,
}

fn parse(list: &str) -> Result<Vec<Build<'_>>> {
    let mut builds = Vec::new();
    for line in list.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        if words.len() < 2 {
            bail!("builds.txt: `{line}`: a name and a source at least");
        }
        let strip = words.last() == Some(&"+strip");
        if strip {
            words.pop();
        }
        builds.push(Build {
            name: words[0],
            source: words[1],
            flags: words[2..].to_vec(),
            strip,
        });
    }
    Ok(builds)
}

/// Build every crasher into `out` (emptied first); their paths.
pub(crate) fn build(ws: &Workspace, out: &Path) -> Result<Vec<PathBuf>> {
    let folder = ws
        .root
        .join("tracer-user/tests/kernel/crash_stacks/crashers");
    let list = fs::read_to_string(folder.join("builds.txt"))
        .with_context(|| format!("reading {}", folder.display()))?;
    if out.exists() {
        fs::remove_dir_all(out).with_context(|| format!("emptying {}", out.display()))?;
    }
    fs::create_dir_all(out)?;
    let mut built = Vec::new();
    for b in parse(&list)? {
        let (_, ext) = b
            .source
            .rsplit_once('.')
            .with_context(|| format!("builds.txt: {}: no extension", b.source))?;
        let compiler = match ext {
            "c" => "cc",
            "cc" => "c++",
            "rs" => "rustc",
            other => bail!("builds.txt: {}: no compiler for .{other}", b.name),
        };
        // Compiled as NAME.EXT, as the tests do: the line tables name it.
        let source = out.join(format!("{}.{ext}", b.name));
        fs::copy(folder.join(b.source), &source)
            .with_context(|| format!("copying {}", b.source))?;
        let bin = out.join(b.name);
        cmd::run(
            Command::new(compiler)
                .args(&b.flags)
                .arg("-o")
                .arg(&bin)
                .arg(&source),
        )?;
        if b.strip {
            cmd::run(Command::new("strip").arg("--strip-all").arg(&bin))?;
        }
        built.push(bin);
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_read_with_its_strip_mark_and_comments() {
        let list = "# a comment\n\nnofp  null_deref.c  -O2 -g\nbare x.c +strip\n";
        assert_eq!(
            parse(list).unwrap(),
            vec![
                Build {
                    name: "nofp",
                    source: "null_deref.c",
                    flags: vec!["-O2", "-g"],
                    strip: false
                },
                Build {
                    name: "bare",
                    source: "x.c",
                    flags: vec![],
                    strip: true
                },
            ]
        );
        assert!(parse("lonely\n").is_err());
    }

    /// The tests' own list parses, and every source it names exists.
    #[test]
    fn the_tests_list_names_sources_that_exist() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tracer-user/tests/kernel/crash_stacks/crashers");
        let list = fs::read_to_string(folder.join("builds.txt")).unwrap();
        let builds = parse(&list).unwrap();
        assert!(builds.len() >= 5);
        for b in builds {
            assert!(folder.join(b.source).is_file(), "{}", b.source);
        }
    }
}
