//! How many client connections the proxy takes at once when the config does not say:
//! sized for the machine from the open-file limit (each proxied connection may hold an
//! upstream connection too) and from memory.

/// File descriptors kept aside for listeners, Redis, logs and the like.
const RESERVED_FDS: u64 = 128;
/// A generous upper bound of what one stalled connection may hold (buffers on both
/// sides, tasks, a partial body frame in flight).
const BYTES_PER_CONNECTION: u64 = 256 * 1024;
/// Bounds of the default.
const MIN: u64 = 64;
const MAX: u64 = 65_536;
/// The default when the machine cannot be read (not Linux).
const FALLBACK: u64 = 1024;

/// The default `max_connections` for this machine.
pub fn default_max_connections() -> usize {
    let by_fds = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| open_files_soft_limit(&text))
        .map(|n| n.saturating_sub(RESERVED_FDS) / 2);
    let by_memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text))
        .map(|bytes| bytes / 4 / BYTES_PER_CONNECTION);
    let n = match (by_fds, by_memory) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => FALLBACK,
    };
    usize::try_from(n.clamp(MIN, MAX)).unwrap_or(FALLBACK as usize)
}

/// The soft limit on "Max open files" in `/proc/self/limits` (`None` when unlimited).
fn open_files_soft_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `MemTotal` in `/proc/meminfo`, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line["MemTotal:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_soft_open_file_limit_and_total_memory() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            20000                1048576              files     \n";
        assert_eq!(open_files_soft_limit(limits), Some(20000));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(open_files_soft_limit(unlimited), None);
        assert_eq!(
            mem_total_bytes("MemTotal:       24684012 kB\nMemFree: 1 kB\n"),
            Some(24684012 * 1024)
        );
        assert_eq!(mem_total_bytes("nothing"), None);
    }

    #[test]
    fn the_default_stays_within_its_bounds() {
        let n = default_max_connections() as u64;
        assert!((MIN..=MAX).contains(&n), "{n}");
    }
}
