//! Running the real `breakerbox` binary in tests, with a scratch folder per test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub fn breakerbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_breakerbox"))
}

/// Runs `breakerbox ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    breakerbox().args(args).output().expect("run breakerbox")
}

/// Stdout of an output, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stderr of an output, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the command succeeded, showing its output otherwise.
pub fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "breakerbox failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
}

/// A fresh scratch folder for test `name` under the target's temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("breakerbox-cli-a")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path.to_string_lossy().into_owned()
}
