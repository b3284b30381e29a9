//! Test certificates made with the `openssl` command (Debian's `openssl`, which
//! `scripts/test.sh` installs): a CA, a server certificate for the given names, and a
//! client certificate, in a fresh directory.

#![allow(dead_code)] // each test binary uses what it needs

use std::path::{Path, PathBuf};
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(status.success(), "openssl {args:?}");
}

/// A key pair and a certificate `name`.crt signed by the CA in `dir`, with `ext` as its
/// extensions file's text.
fn signed(dir: &Path, name: &str, subject: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).expect("write extensions");
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        dir,
        &[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "1",
            "-extfile",
            &extfile,
        ],
    );
}

/// In a fresh directory named after `label`: `ca.crt`/`ca.key` (the CA), `server.crt`/
/// `server.key` for the subject alternative names `san` (e.g. `IP:127.0.0.1`), and
/// `client.crt`/`client.key` for client authentication.
pub fn certificates(label: &str, san: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bb-tls-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("certificate directory");
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=breakerbox test CA",
            "-days",
            "1",
        ],
    );
    signed(
        &dir,
        "server",
        "/CN=breakerbox test server",
        &format!("subjectAltName={san}\n"),
    );
    signed(
        &dir,
        "client",
        "/CN=breakerbox test client",
        "extendedKeyUsage=clientAuth\n",
    );
    dir
}
