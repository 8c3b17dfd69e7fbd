//! The floor under the sampler's cost: what one wake-up per tick costs a
//! thread on this machine with no work at all, three ways (a periodic
//! timerfd, as the sampler waits; `clock_nanosleep` to absolute deadlines;
//! `park_timeout` to relative ones, as the sampler waited before), beside
//! the sampler's reading itself (a `pread` of /proc/PID/statm).
//!
//! Why: at 1 kHz the sampler's CPU is almost all wake-up (the kernel's
//! context switch); no loop design goes below this floor, so a budget for
//! the sampler is judged against it. CPU is the thread's own
//! `se.sum_exec_runtime` (/proc/thread-self/schedstat, ns).
//!
//!   cargo bench --bench wakeup [-- SECONDS]     (default 5 s per way)

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// The calling thread's CPU time in seconds (ns resolution).
fn thread_cpu_s() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat (Linux)");
    let ns: f64 = text
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("schedstat's first field");
    ns / 1e9
}

fn timespec_after(start: &libc::timespec, ns: u64) -> libc::timespec {
    let total = start.tv_nsec as u64 + ns;
    libc::timespec {
        tv_sec: start.tv_sec + (total / 1_000_000_000) as libc::time_t,
        tv_nsec: (total % 1_000_000_000) as libc::c_long,
    }
}

/// Runs `tick` once per ms for `seconds` on a new thread; µs of thread CPU per tick.
fn per_tick(way: &'static str, seconds: f64, work: bool) -> (f64, f64) {
    std::thread::spawn(move || {
        let statm = std::fs::File::open("/proc/self/statm").expect("statm");
        let mut buf = [0u8; 256];
        let ticks = (seconds * 1000.0) as u64;
        let interval = Duration::from_millis(1);
        let cpu0 = thread_cpu_s();
        let wall0 = Instant::now();
        match way {
            "timerfd" => {
                // SAFETY: plain syscalls on a descriptor this block owns.
                unsafe {
                    let fd = libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC);
                    assert!(fd >= 0, "timerfd_create");
                    let every = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 1_000_000,
                    };
                    let spec = libc::itimerspec {
                        it_interval: every,
                        it_value: every,
                    };
                    libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut());
                    let mut n = [0u8; 8];
                    for _ in 0..ticks {
                        if work {
                            let _ = statm.read_at(&mut buf, 0);
                        }
                        libc::read(fd, n.as_mut_ptr().cast(), 8);
                    }
                    libc::close(fd);
                }
            }
            "clock_nanosleep" => {
                let mut start = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: clock_gettime and clock_nanosleep write only the locals given.
                unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut start) };
                for k in 1..=ticks {
                    if work {
                        let _ = statm.read_at(&mut buf, 0);
                    }
                    let at = timespec_after(&start, k * 1_000_000);
                    // SAFETY: as above.
                    unsafe {
                        libc::clock_nanosleep(
                            libc::CLOCK_MONOTONIC,
                            libc::TIMER_ABSTIME,
                            &at,
                            std::ptr::null_mut(),
                        )
                    };
                }
            }
            _ => {
                let mut next = Instant::now();
                for _ in 0..ticks {
                    if work {
                        let _ = statm.read_at(&mut buf, 0);
                    }
                    next += interval;
                    loop {
                        let now = Instant::now();
                        if now >= next {
                            break;
                        }
                        std::thread::park_timeout(next - now);
                    }
                }
            }
        }
        let cpu = thread_cpu_s() - cpu0;
        let wall = wall0.elapsed().as_secs_f64();
        (1e6 * cpu / ticks as f64, 100.0 * cpu / wall)
    })
    .join()
    .expect("the ticking thread")
}

fn main() {
    // `cargo bench` passes `--bench`; a number is the seconds per way.
    let seconds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(5.0);
    println!("thread CPU per 1 ms tick, {seconds} s each (µs per tick, % of a core):");
    for way in ["timerfd", "clock_nanosleep", "park_timeout"] {
        for work in [false, true] {
            let (us, pct) = per_tick(way, seconds, work);
            println!(
                "  {way:<16} {:<24} {us:6.2} µs  {pct:5.2} %",
                if work {
                    "+ pread of statm"
                } else {
                    "wake-up only"
                }
            );
        }
    }
}
