//! Who holds the metrics port's connections. A fixed cap answered `503` to
//! newcomers let one peer keep 32 connections open, each sending its head a
//! byte at a time and reopened when closed: every scrape got `503` for as
//! long as it liked (0 of 73 scrapes answered over 20 s). Now:
//!
//! - a peer (an IP address) holds at most [`PER_PEER`] connections, so a
//!   scraper at another address always finds room;
//! - when a peer's share, or the whole table, is full, the **oldest
//!   connection that has not completed its request head** is closed and
//!   the newcomer served: a slow head loses to a fresh one, never the
//!   reverse; only when every connection is being answered is the newcomer
//!   told `503`;
//! - a head must arrive at [`MIN_HEAD_RATE`] bytes a second (after
//!   [`RATE_GRACE`]), within the head timeout: a byte a second is closed
//!   after one second, not after the timeout.
use std::{
    io,
    net::IpAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::Notify,
};

/// Connections served at once. A Prometheus pair scrapes with one each;
/// the rest is room for curl and retries. Each costs an fd and at most
/// `MAX_HEAD` plus one response in memory.
pub const MAX_CONNECTIONS: usize = 32;
/// Connections one peer address holds at once: a scraper opens one per
/// scrape, so 8 leaves room for retries and a second scraper behind the
/// same address, and leaves 24 to everyone else.
pub const PER_PEER: usize = 8;
/// The slowest request head kept past [`RATE_GRACE`]: a scraper's ~200
/// bytes arrive in one segment.
pub(super) const MIN_HEAD_RATE: usize = 128;
/// How long a connection may send nothing before the rate counts (a
/// connection's first bytes may wait for the peer's scheduler).
pub(super) const RATE_GRACE: Duration = Duration::from_secs(1);

/// One connection in the table, oldest first.
struct Entry {
    id: u64,
    peer: IpAddr,
    head_done: Arc<AtomicBool>,
    close: Arc<Notify>,
}

#[derive(Default)]
pub(super) struct Table {
    next: u64,
    conns: Vec<Entry>,
}

/// A connection's place in the [`Table`]: it leaves the table when dropped.
pub(super) struct Slot {
    table: Arc<Mutex<Table>>,
    id: u64,
    /// Set when the request head has been read whole (the service runs).
    pub(super) head_done: Arc<AtomicBool>,
    /// Notified when a newer connection takes this one's place.
    pub(super) close: Arc<Notify>,
}

impl Table {
    /// A place for a connection from `peer`: making room by closing the
    /// oldest connection that has not sent its whole head (of this peer
    /// when its share is full, else of anyone when the table is); `None`
    /// when there is none such to close (every one is being answered).
    pub(super) fn admit(table: &Arc<Mutex<Table>>, peer: IpAddr) -> Option<Slot> {
        let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
        let mine = t.conns.iter().filter(|c| c.peer == peer).count();
        if mine >= PER_PEER {
            t.evict(|c| c.peer == peer)?;
        } else if t.conns.len() >= MAX_CONNECTIONS {
            t.evict(|_| true)?;
        }
        t.next += 1;
        let entry = Entry {
            id: t.next,
            peer,
            head_done: Arc::default(),
            close: Arc::default(),
        };
        let slot = Slot {
            table: table.clone(),
            id: entry.id,
            head_done: entry.head_done.clone(),
            close: entry.close.clone(),
        };
        t.conns.push(entry);
        Some(slot)
    }

    /// Close the oldest connection matching `which` whose head is not
    /// complete; it leaves the table now (its task ends at its next poll).
    fn evict(&mut self, which: impl Fn(&Entry) -> bool) -> Option<()> {
        let i = self
            .conns
            .iter()
            .position(|c| which(c) && !c.head_done.load(Ordering::Acquire))?;
        let gone = self.conns.remove(i);
        // A permit is kept if the task has not waited yet.
        gone.close.notify_one();
        Some(())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.conns.retain(|c| c.id != self.id);
    }
}

/// Resolves when a head still incomplete is arriving slower than
/// [`MIN_HEAD_RATE`] (checked every 250 ms past [`RATE_GRACE`]); never once
/// the head is done.
pub(super) async fn head_too_slow(read: &AtomicUsize, head_done: &AtomicBool) {
    let start = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if head_done.load(Ordering::Acquire) {
            return std::future::pending().await;
        }
        let elapsed = start.elapsed();
        let due = elapsed.as_secs_f64() * MIN_HEAD_RATE as f64;
        if elapsed >= RATE_GRACE && (read.load(Ordering::Relaxed) as f64) < due {
            return;
        }
    }
}

/// A stream that counts the bytes read from it (the head's rate).
pub(super) struct Metered<S> {
    pub(super) inner: S,
    pub(super) read: Arc<AtomicUsize>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n, Ordering::Relaxed);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_share_closes_its_oldest_slow_head_not_the_newcomer() {
        let table = Arc::new(Mutex::new(Table::default()));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.1".parse().unwrap();
        let mut held: Vec<Slot> = (0..PER_PEER)
            .map(|_| Table::admit(&table, a).unwrap())
            .collect();
        // The first one has sent its head (it is being answered): kept.
        held[0].head_done.store(true, Ordering::Release);
        let newer = Table::admit(&table, a).unwrap();
        let len = |t: &Arc<Mutex<Table>>| t.lock().unwrap().conns.len();
        assert_eq!(len(&table), PER_PEER);
        // The oldest slow one (the second) was told to close, not the first.
        let closed = held.remove(1);
        assert!(notified(&closed.close));
        assert!(!notified(&held[0].close));
        // Another peer is untouched by `a`'s share.
        let other = Table::admit(&table, b).unwrap();
        assert_eq!(len(&table), PER_PEER + 1);
        drop((newer, other, closed, held));
        assert_eq!(len(&table), 0);
        // Every one answering: the newcomer is refused.
        let busy: Vec<Slot> = (0..PER_PEER)
            .map(|_| Table::admit(&table, a).unwrap())
            .collect();
        for s in &busy {
            s.head_done.store(true, Ordering::Release);
        }
        assert!(Table::admit(&table, a).is_none());
    }

    /// Whether `n` holds a permit (a notification not yet waited for).
    fn notified(n: &Notify) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(1), n.notified())
                .await
                .is_ok()
        })
    }
}
