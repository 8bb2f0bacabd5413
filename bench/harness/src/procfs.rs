//! Resource usage of running processes, read from `/proc`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use serde::Serialize;

/// Memory and CPU of one process, or the sum over several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Resident set size now (`VmRSS`).
    pub rss_bytes: u64,
    /// Peak resident set size (`VmHWM`); summed over processes, an upper bound of the peak of
    /// the sum.
    pub peak_rss_bytes: u64,
    /// The anonymous part of `rss_bytes` (`RssAnon`): heaps and stacks.
    pub rss_anon_bytes: u64,
    /// The file-backed part of `rss_bytes` (`RssFile`): the binary's and other mapped files'
    /// pages, such as compiled modules loaded from the compile cache.
    pub rss_file_bytes: u64,
    /// Proportional set size (`Pss` of `smaps_rollup`): each page divided by the number of
    /// mappings sharing it, so a file mapped several times counts once.
    pub pss_bytes: u64,
    /// User plus system CPU time of every thread, including threads that have exited.
    pub cpu_seconds: f64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            rss_bytes: self.rss_bytes + other.rss_bytes,
            peak_rss_bytes: self.peak_rss_bytes + other.peak_rss_bytes,
            rss_anon_bytes: self.rss_anon_bytes + other.rss_anon_bytes,
            rss_file_bytes: self.rss_file_bytes + other.rss_file_bytes,
            pss_bytes: self.pss_bytes + other.pss_bytes,
            cpu_seconds: self.cpu_seconds + other.cpu_seconds,
        }
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), std::ops::Add::add)
    }
}

/// The usage of the live process `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .with_context(|| format!("reading /proc/{pid}/smaps_rollup"))?;
    Ok(Usage {
        rss_bytes: status_kib(&status, "VmRSS").context("no VmRSS")? * 1024,
        peak_rss_bytes: status_kib(&status, "VmHWM").context("no VmHWM")? * 1024,
        rss_anon_bytes: status_kib(&status, "RssAnon").context("no RssAnon")? * 1024,
        rss_file_bytes: status_kib(&status, "RssFile").context("no RssFile")? * 1024,
        pss_bytes: status_kib(&rollup, "Pss").context("no Pss")? * 1024,
        cpu_seconds: cpu_ticks(&stat).context("malformed /proc/PID/stat")? as f64
            / ticks_per_second(),
    })
}

/// The value in KiB of a `NAME:   123 kB` line of `/proc/PID/status` or `smaps_rollup`.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// `utime + stime` of a `/proc/PID/stat` line, in clock ticks. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted from its closing parenthesis.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `getconf CLK_TCK`: the unit of CPU times in `/proc`; 100 when it cannot be read.
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Clock ticks the machine's CPUs spent busy and in total since boot, from the first line of
/// `/proc/stat` (idle and iowait count as not busy).
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    busy: u64,
    total: u64,
}

impl CpuTimes {
    /// The times now.
    pub fn now() -> Result<Self> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let line = stat.lines().next().context("an empty /proc/stat")?;
        cpu_times(line).context("malformed /proc/stat")
    }

    /// The share of CPU time spent busy since `earlier`, in percent.
    pub fn busy_percent_since(&self, earlier: &CpuTimes) -> f64 {
        let total = self.total.saturating_sub(earlier.total).max(1);
        100.0 * self.busy.saturating_sub(earlier.busy) as f64 / total as f64
    }
}

/// The busy and total ticks of a `cpu  user nice system idle iowait irq softirq steal ...` line.
fn cpu_times(line: &str) -> Option<CpuTimes> {
    let ticks: Vec<u64> = line
        .strip_prefix("cpu ")?
        .split_whitespace()
        .take(8)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4)?;
    Some(CpuTimes {
        busy: total - idle,
        total,
    })
}

/// Where the resident memory of process `pid` lies, by kind of mapping, in bytes: the program's
/// own file, compiled modules mapped from the compile cache (`*.cwasm` files), other files, the
/// heap, stacks, and anonymous mappings by the size of their reservation (a Wasm linear memory
/// reserves gigabytes of address space, an allocator arena or thread stack far less).
pub fn breakdown(pid: u32) -> Result<BTreeMap<String, u64>> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))
        .with_context(|| format!("reading /proc/{pid}/smaps"))?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    Ok(resident_by_kind(&smaps, &exe.to_string_lossy()))
}

/// [`breakdown`] of the text of an smaps file, `exe` being the program's path. Anonymous
/// mappings that follow one another without a gap count as one reservation: a runtime reserves
/// a region inaccessible and opens parts of it as they are used, which splits it into several
/// mappings, the resident pages in the small ones.
fn resident_by_kind(smaps: &str, exe: &str) -> BTreeMap<String, u64> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        if first == "Rss:" {
            let kib: u64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            if let Some(last) = mappings.last_mut() {
                last.rss += kib * 1024;
            }
        } else if !first.ends_with(':')
            && let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            let path = fields.nth(4).unwrap_or("").to_owned();
            mappings.push(Mapping {
                start,
                end,
                path,
                rss: 0,
            });
        }
    }
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut index = 0;
    while index < mappings.len() {
        // The run of anonymous mappings without gaps that starts here, or this mapping alone.
        let mut last = index;
        while mappings[index].path.is_empty()
            && mappings
                .get(last + 1)
                .is_some_and(|next| next.path.is_empty() && next.start == mappings[last].end)
        {
            last += 1;
        }
        let run = &mappings[index..=last];
        let size = run[run.len() - 1].end - run[0].start;
        let rss: u64 = run.iter().map(|m| m.rss).sum();
        *kinds
            .entry(mapping_kind(&run[0].path, exe, size))
            .or_default() += rss;
        index = last + 1;
    }
    kinds.retain(|_, bytes| *bytes > 0);
    kinds
}

/// One line of the mappings of a process.
struct Mapping {
    start: u64,
    end: u64,
    /// Empty for anonymous memory.
    path: String,
    /// Resident bytes.
    rss: u64,
}

/// The kind of a mapping of `path` (empty: anonymous) reserving `size` bytes.
fn mapping_kind(path: &str, exe: &str, size: u64) -> String {
    const GIB: u64 = 1 << 30;
    match path {
        "" if size >= GIB => "anonymous, reservations of 1 GiB or more (Wasm memories)",
        "" => "anonymous, smaller reservations (allocator arenas, thread stacks)",
        "[heap]" => "heap",
        "[stack]" => "main stack",
        p if p == exe => "program",
        p if p.ends_with(".cwasm") => "compiled modules",
        p if p.starts_with('[') => "kernel",
        _ => "other files",
    }
    .to_owned()
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn memory_available() -> Result<u64> {
    let info = std::fs::read_to_string("/proc/meminfo")?;
    Ok(status_kib(&info, "MemAvailable").context("no MemAvailable")? * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_counted_after_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 10 0 0";
        assert_eq!(cpu_ticks(stat), Some(300));
    }

    #[test]
    fn status_values_are_read_in_kib() {
        let status = "Name:\tbench\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(2048));
        assert_eq!(status_kib(status, "VmRSS"), Some(1024));
        assert_eq!(status_kib(status, "VmSwap"), None);
        let rollup = "Rss:  300 kB\nPss:  200 kB\nPss_Anon:  50 kB\n";
        assert_eq!(status_kib(rollup, "Pss"), Some(200));
    }

    #[test]
    fn idle_and_iowait_are_not_busy() {
        let times = cpu_times("cpu  100 5 50 800 40 3 2 0 0 0").unwrap();
        assert_eq!((times.busy, times.total), (160, 1000));
        let later = CpuTimes {
            busy: 260,
            total: 1200,
        };
        assert_eq!(later.busy_percent_since(&times), 50.0);
    }

    #[test]
    fn resident_memory_is_summed_by_kind_of_mapping() {
        let smaps = "\
55d0a000-55d0b000 r-xp 00000000 08:01 12 /usr/bin/kubewasm
Rss:                   8 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Rss:                 100 kB
7f0000100000-7f0200000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f0300000000-7f0300100000 rw-p 00000000 00:00 0
Rss:                  12 kB
7f0400000000-7f0400010000 r-xp 00000000 08:01 13 /cache/ab.cwasm
Rss:                  16 kB
Size:                 64 kB
";
        let kinds = resident_by_kind(smaps, "/usr/bin/kubewasm");
        assert_eq!(kinds["program"], 8 * 1024);
        assert_eq!(kinds["compiled modules"], 16 * 1024);
        assert_eq!(
            kinds["anonymous, reservations of 1 GiB or more (Wasm memories)"],
            100 * 1024
        );
        assert_eq!(
            kinds["anonymous, smaller reservations (allocator arenas, thread stacks)"],
            12 * 1024
        );
    }

    #[test]
    fn this_process_uses_memory() {
        let own = usage(std::process::id()).unwrap();
        assert!(own.rss_bytes > 0 && own.peak_rss_bytes >= own.rss_bytes);
        assert!(own.pss_bytes > 0 && own.pss_bytes <= own.rss_bytes);
    }
}
