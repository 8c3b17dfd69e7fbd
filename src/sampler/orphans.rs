//! Orphans of a measured tree kept in the tree (`exec --tree`, issue 47).
//!
//! A process whose parent exits is re-parented to the nearest ancestor that
//! is a child subreaper, else to init. A program that `setsid`s and
//! double-forks (a daemon's way) leaves its grandchild to init, outside the
//! tree the tree probe walks down from the root: its memory was never
//! counted. memrel makes itself a child subreaper ([`adopt`]) before it
//! starts a tree's root, so such a grandchild becomes memrel's own child;
//! the tree probe then counts memrel's children that are not a root it
//! measures (and their descendants) as the tree's ([`adopted`]), and the
//! orchestrator reaps them once they exit (`orchestrator::child::reap_adopted`).
//!
//! Which tree an orphan belongs to, where several are measured at once
//! (lanes over GPUs): the one whose processes it was seen in, or whose
//! process group or session it is in (a `setsid` child's session is its
//! own pid, which the tree may have seen); where only one tree is measured,
//! every orphan memrel adopted is its.
//!
//! It must not wait for anything: the reaper does, and only for the pids
//! this module names ([`adopted_pids`]), never a root (a root's exit stop
//! belongs to its tracer, `orchestrator::exit_stop`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// memrel is a child subreaper (set once, kept for the process's life).
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// The roots of the trees measured now (memrel's children), counted per
/// probe open on them (a run's sampler and its edge reader each have one).
static ROOTS: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// Every orphan memrel adopted that a tree counted: what the reaper reaps.
static ADOPTED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Makes memrel a child subreaper: orphans of the processes it starts
/// become its children, not init's. Once per memrel; safe to call again.
pub fn adopt() -> std::io::Result<()> {
    if ADOPTING.load(Ordering::Acquire) {
        return Ok(());
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    ADOPTING.store(true, Ordering::Release);
    Ok(())
}

/// A tree rooted at `root` is measured (until [`unregister`]).
pub(super) fn register(root: u32) {
    if let Ok(mut roots) = ROOTS.lock() {
        *roots.entry(root).or_insert(0) += 1;
    }
}

pub(super) fn unregister(root: u32) {
    if let Ok(mut roots) = ROOTS.lock() {
        if let Some(n) = roots.get_mut(&root) {
            *n -= 1;
            if *n == 0 {
                roots.remove(&root);
            }
        }
    }
}

/// memrel's pid where it adopts the orphans of `root`'s tree: it is a
/// subreaper and `root` is its child (`ppid`: the root's parent).
pub(super) fn adopter(ppid: Option<u32>) -> Option<u32> {
    let me = std::process::id();
    (ADOPTING.load(Ordering::Acquire) && ppid == Some(me)).then_some(me)
}

/// Of `children` (memrel's children now), the orphans that belong to the
/// tree of `root`, which has seen the processes `seen`: not a root of any
/// tree, and in this tree by what it was seen as, or its group or session
/// (see the module's doc). Each is remembered for the reaper.
pub(super) fn adopted(root: u32, seen: &BTreeSet<u32>, children: &[u32]) -> Vec<u32> {
    let Ok(roots) = ROOTS.lock() else {
        return Vec::new();
    };
    let alone = roots.len() <= 1;
    let found: Vec<u32> = children
        .iter()
        .copied()
        .filter(|pid| !roots.contains_key(pid))
        .filter(|&pid| {
            alone
                || seen.contains(&pid)
                || group_and_session(pid)
                    .is_some_and(|(g, s)| g == root || seen.contains(&g) || seen.contains(&s))
        })
        .collect();
    drop(roots);
    if let Ok(mut adopted) = ADOPTED.lock() {
        adopted.extend(found.iter().copied());
    }
    found
}

/// The orphans adopted so far and not yet reaped.
pub fn adopted_pids() -> Vec<u32> {
    ADOPTED
        .lock()
        .map(|a| a.iter().copied().collect())
        .unwrap_or_default()
}

/// `pid` was reaped (or is no child of memrel's): forgotten.
pub fn forget(pid: u32) {
    if let Ok(mut adopted) = ADOPTED.lock() {
        adopted.remove(&pid);
    }
}

/// (process group, session) of `pid` from /proc/PID/stat.
fn group_and_session(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_ascii_whitespace();
    let group = fields.nth(2)?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((group, session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_is_never_an_orphan_and_one_tree_takes_every_orphan() {
        // Pids far above any real one: no /proc entry, no group to read.
        let (root, other_root, orphan) = (4_000_001, 4_000_002, 4_000_003);
        register(root);
        register(root);
        unregister(root);
        let seen = BTreeSet::from([root]);
        // Other tests may measure trees at the same time: only what is
        // certain either way is asserted.
        let got = adopted(root, &seen, &[root, orphan]);
        assert!(!got.contains(&root), "{got:?}");
        register(other_root);
        let got = adopted(root, &seen, &[other_root, orphan]);
        assert!(!got.contains(&other_root), "{got:?}");
        assert!(got.is_empty(), "an orphan of neither tree: {got:?}");
        let seen_it = BTreeSet::from([root, orphan]);
        assert_eq!(adopted(root, &seen_it, &[orphan]), [orphan]);
        unregister(other_root);
        unregister(root);
        forget(orphan);
        assert!(!adopted_pids().contains(&orphan));
    }
}
