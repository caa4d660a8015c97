//! Settings of the whole server process: memory given back to the system after a burst
//! (thousands of connections, a flood of large answers; the allocator keeps freed memory until
//! told otherwise), room for as many connections as the system allows, and a file-size limit
//! that fails writes instead of killing the process.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Transparent huge pages make the allocator's unit of return 2 MiB: one live allocation keeps
/// a whole huge page resident, so after a burst of connections closed the process stayed at
/// hundreds of MB. Small pages let freed memory go back. The process flag also covers regions
/// the allocator reserved before `main` ran.
pub fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// How often at most a worker collects when it goes idle: often enough that a burst's memory
/// goes back when the burst ends, seldom enough to cost nothing under load.
const COLLECT_EVERY: Duration = Duration::from_millis(10);

/// Called as a runtime worker goes idle. A block freed on another thread than the one that
/// allocated it returns to its page only when the owner thread next collects, and an idle
/// worker never does on its own: the pages of a burst would stay resident.
pub fn collect_when_idle() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    if LAST
        .get()
        .is_some_and(|last| now.duration_since(last) < COLLECT_EVERY)
    {
        return;
    }
    LAST.set(Some(now));
    // SAFETY: mi_collect only walks the calling thread's own allocator state.
    unsafe { libmimalloc_sys::mi_collect(false) }
}

/// Raises the soft limit on open descriptors to the hard one, as the system lets any process do:
/// the soft default (often 1,024) would cap a public server at a few hundred connections.
/// Returns the limit in force (Linux; elsewhere `None`, and the cap takes its default).
pub fn raise_descriptor_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read or write only the struct passed.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return None;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max,
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
        }
        Some(limit.rlim_cur)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// A file-size limit (`ulimit -f`) reached by the catalog kills the process by default
/// (SIGXFSZ). Ignored, the write fails instead, as on a full disk: the sources wait and retry,
/// and `/readyz` says why.
pub fn survive_file_size_limit() {
    // SAFETY: only the disposition changes to "ignore": no handler code is installed, and
    // nothing else in the process handles this signal.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
