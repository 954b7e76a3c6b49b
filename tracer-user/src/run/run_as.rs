//! Least privilege for the wrapped command: under sudo, `tracer record` runs
//! CMD as the user who invoked sudo (`--user` to choose); only the tracer
//! keeps root, which it needs for BPF, /proc, snapshots and leak kills.
//!
//! Everything is resolved in the tracer before the fork (user database,
//! supplementary groups): between fork and exec the child only calls
//! setgroups, setresgid and setresuid, which are async-signal-safe.
use std::{ffi::CString, process::Command};

use nix::unistd::{self, Gid, Uid, User};

use crate::error::TracerError;

/// Who the wrapped command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub uid: Uid,
    /// The user's name, when the user database or sudo knows it.
    pub name: Option<String>,
    /// Credentials to take in the child; `None`: it keeps the tracer's.
    change: Option<Change>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Change {
    gid: Gid,
    /// Supplementary groups (the primary group included), as initgroups(3)
    /// would set them.
    groups: Vec<Gid>,
    /// `HOME`, `USER`, `LOGNAME` for the child, as `sudo -u` sets them.
    env: Vec<(&'static str, String)>,
}

/// The sudo variables that name the invoking user.
#[derive(Clone, Debug, Default)]
pub struct SudoEnv {
    pub uid: Option<String>,
    pub gid: Option<String>,
    pub user: Option<String>,
}

impl SudoEnv {
    pub fn from_process() -> Self {
        let var = |k| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            uid: var("SUDO_UID"),
            gid: var("SUDO_GID"),
            user: var("SUDO_USER"),
        }
    }
}

impl RunAs {
    /// `--user SPEC` if given; else, when the tracer is root by sudo, the
    /// user who ran sudo; else the tracer's own user, unchanged.
    pub fn resolve(spec: Option<&str>, sudo: &SudoEnv) -> Result<Self, TracerError> {
        let me = Uid::effective();
        let target = match spec {
            Some(spec) => lookup(spec)?,
            None if me.is_root() => match from_sudo(sudo)? {
                Some(t) => t,
                None => return Ok(Self::current()),
            },
            None => return Ok(Self::current()),
        };
        if target.uid == me {
            // Already that user (`--user root` under sudo keeps root): no change at all.
            return Ok(Self {
                change: None,
                ..target
            });
        }
        if !me.is_root() {
            return Err(TracerError::UserNeedsRoot(target.describe()));
        }
        Ok(target)
    }

    /// The tracer's own user: nothing changes.
    pub fn current() -> Self {
        let uid = Uid::effective();
        Self {
            uid,
            name: User::from_uid(uid).ok().flatten().map(|u| u.name),
            change: None,
        }
    }

    /// `alice (uid 1000)`, or `uid 1000` without a name.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} (uid {})", self.uid),
            None => format!("uid {}", self.uid),
        }
    }

    /// The user and group that take the output over, when the command runs
    /// as another user than the tracer.
    pub fn owner(&self) -> Option<(Uid, Gid)> {
        self.change.as_ref().map(|c| (self.uid, c.gid))
    }

    /// Whether the command's user may read a file of `uid`:`gid` with
    /// `mode`, by its permission bits (the tracer's own user, unchanged,
    /// reads what the tracer reads). Root reads everything.
    pub fn may_read(&self, uid: u32, gid: u32, mode: u32) -> bool {
        let Some(c) = &self.change else {
            return true;
        };
        if self.uid.is_root() {
            return true;
        }
        if self.uid.as_raw() == uid {
            return mode & 0o400 != 0;
        }
        let in_group = c.gid.as_raw() == gid || c.groups.iter().any(|g| g.as_raw() == gid);
        if in_group {
            return mode & 0o040 != 0;
        }
        mode & 0o004 != 0
    }

    /// Another user, for tests of what that user may see: `uid`, primary
    /// group `gid`, no other group.
    #[cfg(test)]
    pub(crate) fn for_test(uid: u32, gid: u32) -> Self {
        Self {
            uid: Uid::from_raw(uid),
            name: None,
            change: Some(Change {
                gid: Gid::from_raw(gid),
                groups: vec![Gid::from_raw(gid)],
                env: Vec::new(),
            }),
        }
    }

    /// Whether the command runs with other credentials than the tracer.
    pub fn changes_user(&self) -> bool {
        self.change.is_some()
    }

    /// The environment the command gets on top of the tracer's own.
    pub fn set_env(&self, cmd: &mut Command) {
        if let Some(c) = &self.change {
            cmd.envs(c.env.iter().map(|(k, v)| (k, v)));
        }
    }

    /// In the child, between fork and exec: take the target credentials,
    /// groups first (it takes privilege), then the gid, then the uid, real,
    /// effective and saved alike, so nothing can be regained.
    /// Async-signal-safe: no allocation, only the three system calls.
    pub fn drop_privileges(&self) -> std::io::Result<()> {
        if let Some(c) = &self.change {
            unistd::setgroups(&c.groups)?;
            unistd::setresgid(c.gid, c.gid, c.gid)?;
            unistd::setresuid(self.uid, self.uid, self.uid)?;
        }
        Ok(())
    }
}

/// A user by name, or by numeric uid, from the user database.
fn lookup(spec: &str) -> Result<RunAs, TracerError> {
    let found = match spec.parse::<u32>() {
        Ok(uid) => User::from_uid(Uid::from_raw(uid)),
        Err(_) => User::from_name(spec),
    };
    let user = found
        .map_err(|source| TracerError::UserLookup {
            spec: spec.to_string(),
            source,
        })?
        .ok_or_else(|| TracerError::UnknownUser(spec.to_string()))?;
    Ok(from_user(user))
}

fn from_user(u: User) -> RunAs {
    let groups = CString::new(u.name.clone())
        .ok()
        .and_then(|name| unistd::getgrouplist(&name, u.gid).ok())
        .unwrap_or_else(|| vec![u.gid]);
    RunAs {
        uid: u.uid,
        change: Some(Change {
            gid: u.gid,
            groups,
            env: vec![
                ("HOME", u.dir.display().to_string()),
                ("USER", u.name.clone()),
                ("LOGNAME", u.name.clone()),
            ],
        }),
        name: Some(u.name),
    }
}

/// The user who ran sudo: SUDO_UID and SUDO_GID are the ids sudo was run
/// with; the user database adds the groups and home when it knows the uid.
/// `None` when not run by sudo, or by root itself.
fn from_sudo(sudo: &SudoEnv) -> Result<Option<RunAs>, TracerError> {
    let Some(uid) = &sudo.uid else {
        return Ok(None);
    };
    let id = |name: &'static str, v: &str| {
        v.parse::<u32>().map_err(|_| TracerError::SudoIdNotNumeric {
            name,
            value: v.to_string(),
        })
    };
    let uid = Uid::from_raw(id("SUDO_UID", uid)?);
    if uid.is_root() {
        return Ok(None);
    }
    let gid = sudo
        .gid
        .as_deref()
        .map(|g| id("SUDO_GID", g).map(Gid::from_raw))
        .transpose()?;
    let known = User::from_uid(uid).ok().flatten();
    Ok(Some(match (known, gid) {
        (Some(u), gid) => {
            let mut t = from_user(u);
            // sudo's SUDO_GID is the group it was run with: it wins.
            if let (Some(c), Some(gid)) = (t.change.as_mut(), gid) {
                if c.gid != gid {
                    c.gid = gid;
                    if !c.groups.contains(&gid) {
                        c.groups.insert(0, gid);
                    }
                }
            }
            t
        }
        (None, Some(gid)) => RunAs {
            uid,
            name: sudo.user.clone(),
            change: Some(Change {
                gid,
                groups: vec![gid],
                env: sudo
                    .user
                    .iter()
                    .flat_map(|n| [("USER", n.clone()), ("LOGNAME", n.clone())])
                    .collect(),
            }),
        },
        (None, None) => return Err(TracerError::SudoUserUnknown(uid.to_string())),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sudo(uid: &str, gid: &str, user: &str) -> SudoEnv {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        SudoEnv {
            uid: s(uid),
            gid: s(gid),
            user: s(user),
        }
    }

    #[test]
    fn described_with_name_and_uid() {
        let r = RunAs {
            uid: Uid::from_raw(1000),
            name: Some("alice".into()),
            change: None,
        };
        assert_eq!(r.describe(), "alice (uid 1000)");
        let r = RunAs { name: None, ..r };
        assert_eq!(r.describe(), "uid 1000");
    }

    #[test]
    fn unknown_user_is_named() {
        let e = lookup("no-such-user-tracer-test").unwrap_err();
        assert!(matches!(e, TracerError::UnknownUser(ref u) if u == "no-such-user-tracer-test"));
        assert_eq!(
            e.to_string(),
            "no such user: no-such-user-tracer-test (--user takes a user name or a numeric uid known to this system)"
        );
    }

    #[test]
    fn root_by_name_or_number() {
        let by_name = lookup("root").unwrap();
        assert!(by_name.uid.is_root());
        assert_eq!(lookup("0").unwrap(), by_name);
        assert_eq!(by_name.describe(), "root (uid 0)");
    }

    #[test]
    fn sudo_env_names_the_invoking_user() {
        assert_eq!(from_sudo(&SudoEnv::default()).unwrap(), None);
        assert_eq!(from_sudo(&sudo("0", "0", "root")).unwrap(), None);
        // Not in the user database: the ids sudo gave, and its name for them.
        let t = from_sudo(&sudo("4000123", "4000123", "ghost"))
            .unwrap()
            .unwrap();
        assert_eq!(t.describe(), "ghost (uid 4000123)");
        let c = t.change.unwrap();
        assert_eq!(c.gid, Gid::from_raw(4000123));
        assert_eq!(c.groups, [Gid::from_raw(4000123)]);
        assert!(c.env.contains(&("USER", "ghost".into())));
        assert!(from_sudo(&sudo("4000123", "", "ghost")).is_err());
        assert!(from_sudo(&sudo("alice", "1", "alice")).is_err());
    }

    #[test]
    fn sudo_env_of_a_known_user() {
        let nobody = User::from_name("nobody").unwrap().expect("a nobody user");
        let t = from_sudo(&sudo(
            &nobody.uid.to_string(),
            &nobody.gid.to_string(),
            "nobody",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(t.uid, nobody.uid);
        let c = t.change.unwrap();
        assert_eq!(c.gid, nobody.gid);
        assert!(c.groups.contains(&nobody.gid));
        assert!(c.env.contains(&("HOME", nobody.dir.display().to_string())));
        assert!(c.env.contains(&("LOGNAME", "nobody".into())));
    }
}
