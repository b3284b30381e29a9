//! Moving a real redis-server's wall clock: `time_shift.c`, compiled here with the
//! system's C compiler, preloaded into the server, reads its offset from a file.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A compiled shim and its offset file, in a directory of their own.
pub struct TimeShift {
    dir: PathBuf,
}

impl TimeShift {
    /// Compiles the shim (with `cc`) into a fresh directory; the offset starts at zero.
    pub fn build() -> TimeShift {
        let dir = std::env::temp_dir().join(format!(
            "bb-time-shift-{}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace("::", "-")
        ));
        std::fs::create_dir_all(&dir).expect("create the shim's directory");
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/time_shift.c");
        let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_string()))
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(dir.join("time_shift.so"))
            .arg(source)
            .arg("-ldl")
            .status()
            .expect("run the C compiler (cc) for the time shim");
        assert!(status.success(), "compiling the time shim failed");
        let shift = TimeShift { dir };
        shift.set_offset_us(0);
        shift
    }

    /// The environment that preloads the shim into a server.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "LD_PRELOAD".to_string(),
                self.dir.join("time_shift.so").display().to_string(),
            ),
            (
                "BB_TIME_OFFSET_FILE".to_string(),
                self.dir.join("offset").display().to_string(),
            ),
        ]
    }

    /// Sets the server's clock to the real time plus `offset_us` (negative: behind).
    pub fn set_offset_us(&self, offset_us: i64) {
        std::fs::write(self.dir.join("offset"), offset_us.to_string())
            .expect("write the shim's offset");
    }

    /// Steps the server's clock back by `by`.
    pub fn step_back(&self, by: Duration) {
        self.set_offset_us(-(by.as_micros() as i64));
    }
}

impl Drop for TimeShift {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
