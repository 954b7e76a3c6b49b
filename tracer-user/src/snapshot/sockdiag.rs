//! Socket tables by inode, from NETLINK_SOCK_DIAG. /proc/net/unix has no
//! peer column, so sock_diag (UDIAG_SHOW_PEER) is the only way to learn which
//! socket the other end of a unix socketpair is. Scope: the network
//! namespace of the caller (a process in another netns is not listed).
use std::{collections::HashMap, io, net::SocketAddr, os::fd::AsRawFd, time::Duration};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::*,
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags as InetStates},
    unix::{nlas::UnixDiagName, ShowFlags, StateFlags as UnixStates, UnixRequest},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};

#[derive(Debug, Clone)]
pub(crate) struct UnixInfo {
    pub sock_type: String,
    pub name: Option<String>,
    pub peer: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct InetInfo {
    pub proto: &'static str,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: String,
}

/// A hang diagnostic must not hang: the kernel answers dumps promptly, but
/// bound every recv anyway.
const RECV_TIMEOUT: Duration = Duration::from_secs(2);

fn dump(req: SockDiagMessage, mut each: impl FnMut(SockDiagMessage)) -> io::Result<()> {
    let mut sock = Socket::new(NETLINK_SOCK_DIAG)?;
    sock.bind_auto()?;
    sock.connect(&NlAddr::new(0, 0))?;
    let tv = libc::timeval {
        // `as _`: time_t is deprecated as a name on musl (its 64-bit transition).
        tv_sec: RECV_TIMEOUT.as_secs() as _,
        tv_usec: 0,
    };
    // SAFETY: valid fd, pointer to a live timeval of the size we pass.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut msg = NetlinkMessage::new(hdr, req.into());
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send(&buf, 0)?;
    loop {
        let (data, _) = sock.recv_from_full()?;
        let mut off = 0;
        while off < data.len() {
            let m = NetlinkMessage::<SockDiagMessage>::deserialize(&data[off..])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::InnerMessage(inner) => each(inner),
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(e
                        .code
                        .map(|c| io::Error::from_raw_os_error(-c.get()))
                        .unwrap_or_else(|| io::Error::other("netlink error")))
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// inode -> type, bound name, peer inode for every unix socket.
pub(crate) fn unix_sockets() -> io::Result<HashMap<u64, UnixInfo>> {
    let mut out = HashMap::new();
    let req = UnixRequest {
        // The crate names only ESTABLISHED|LISTEN; all bits = every state
        // (unconnected and connecting sockets too).
        state_flags: UnixStates::from_bits_retain(u32::MAX),
        inode: 0,
        show_flags: ShowFlags::PEER | ShowFlags::NAME,
        cookie: [0xff; 8],
    };
    dump(SockDiagMessage::UnixRequest(req), |m| {
        if let SockDiagMessage::UnixResponse(r) = m {
            let sock_type = match r.header.kind {
                SOCK_STREAM => "stream",
                SOCK_DGRAM => "dgram",
                SOCK_SEQPACKET => "seqpacket",
                _ => "other",
            };
            let name = r.name().map(|n| match n {
                UnixDiagName::Pathname(p) => p.to_string_lossy().into_owned(),
                UnixDiagName::Abstract(a) => format!("@{}", String::from_utf8_lossy(a)),
            });
            let peer = r.peer().filter(|p| *p != 0).map(u64::from);
            out.insert(
                u64::from(r.header.inode),
                UnixInfo {
                    sock_type: sock_type.into(),
                    name,
                    peer,
                },
            );
        }
    })?;
    Ok(out)
}

/// inode -> endpoints and state for TCP/UDP over v4 and v6.
pub(crate) fn inet_sockets() -> io::Result<HashMap<u64, InetInfo>> {
    let mut out = HashMap::new();
    for (family, protocol, proto) in [
        (AF_INET, IPPROTO_TCP, "tcp"),
        (AF_INET6, IPPROTO_TCP, "tcp6"),
        (AF_INET, IPPROTO_UDP, "udp"),
        (AF_INET6, IPPROTO_UDP, "udp6"),
    ] {
        let req = InetRequest {
            family,
            protocol,
            extensions: ExtensionFlags::empty(),
            states: InetStates::all(),
            socket_id: if family == AF_INET {
                SocketId::new_v4()
            } else {
                SocketId::new_v6()
            },
        };
        dump(SockDiagMessage::InetRequest(req), |m| {
            if let SockDiagMessage::InetResponse(r) = m {
                let id = &r.header.socket_id;
                out.insert(
                    u64::from(r.header.inode),
                    InetInfo {
                        proto,
                        local: SocketAddr::new(id.source_address, id.source_port),
                        remote: SocketAddr::new(id.destination_address, id.destination_port),
                        state: tcp_state_name(r.header.state).into(),
                    },
                );
            }
        })?;
    }
    out.remove(&0); // TIME_WAIT/request sockets have no inode
    Ok(out)
}

/// Fallback when sock_diag is unavailable (e.g. module not loaded).
pub(crate) fn inet_sockets_procfs() -> HashMap<u64, InetInfo> {
    let tcp = [("tcp", procfs::net::tcp()), ("tcp6", procfs::net::tcp6())]
        .into_iter()
        .flat_map(|(proto, rows)| {
            let rows = rows.unwrap_or_default().into_iter();
            rows.map(move |e| {
                (
                    e.inode,
                    procfs_row(proto, e.local_address, e.remote_address, e.state),
                )
            })
        });
    let udp = [("udp", procfs::net::udp()), ("udp6", procfs::net::udp6())]
        .into_iter()
        .flat_map(|(proto, rows)| {
            let rows = rows.unwrap_or_default().into_iter();
            rows.map(move |e| {
                (
                    e.inode,
                    procfs_row(proto, e.local_address, e.remote_address, e.state),
                )
            })
        });
    let mut out: HashMap<u64, InetInfo> = tcp.chain(udp).collect();
    out.remove(&0);
    out
}

/// A TCP or a UDP row of /proc/net (the same fields, their own types).
fn procfs_row(
    proto: &'static str,
    local: SocketAddr,
    remote: SocketAddr,
    state: impl std::fmt::Debug,
) -> InetInfo {
    InetInfo {
        proto,
        local,
        remote,
        state: format!("{state:?}").to_uppercase(),
    }
}

/// For connections inside this machine both ends are in the table: the
/// peer of (local=a, remote=b) is the socket with (local=b, remote=a).
pub(crate) fn inet_peers(table: &HashMap<u64, InetInfo>) -> HashMap<u64, u64> {
    let by_ends: HashMap<(&str, SocketAddr, SocketAddr), u64> = table
        .iter()
        .filter(|(_, i)| i.remote.port() != 0)
        .map(|(ino, i)| ((i.proto, i.local, i.remote), *ino))
        .collect();
    table
        .iter()
        .filter_map(|(ino, i)| {
            let peer = by_ends.get(&(i.proto, i.remote, i.local))?;
            (peer != ino).then_some((*ino, *peer))
        })
        .collect()
}

fn tcp_state_name(s: u8) -> &'static str {
    match s {
        TCP_ESTABLISHED => "ESTABLISHED",
        TCP_SYN_SENT => "SYN_SENT",
        TCP_SYN_RECV => "SYN_RECV",
        TCP_FIN_WAIT1 => "FIN_WAIT1",
        TCP_FIN_WAIT2 => "FIN_WAIT2",
        TCP_TIME_WAIT => "TIME_WAIT",
        TCP_CLOSE => "CLOSE",
        TCP_CLOSE_WAIT => "CLOSE_WAIT",
        TCP_LAST_ACK => "LAST_ACK",
        TCP_LISTEN => "LISTEN",
        TCP_CLOSING => "CLOSING",
        _ => "UNKNOWN",
    }
}
