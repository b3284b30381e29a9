//! `[upstream.tls]` of an `https://` upstream: `ca_file` (PEM certificates trusted besides
//! the system's roots), `system_roots` (default true), `server_name` (the name the
//! upstream's certificate must carry and SNI; default: the URL's host), `client_cert`
//! and `client_key` (PEM; both or neither). Paths are read as given (relative to the
//! working directory), once, when the file is checked.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use toml::{Table, Value};

use super::fields::{boolean, join, string, type_name, Errors};
use super::Protocol;
use crate::proxy::tls::{ListenerCert, ListenerTls, UpstreamTls};
use rustls::sign::CertifiedKey;

const TLS_KEYS: &[&str] = &[
    "ca_file",
    "system_roots",
    "server_name",
    "client_cert",
    "client_key",
];

/// The TLS of an upstream whose URL's scheme is `https` (`https`), its host `host` as the
/// URL gives it, offering `protocol` by ALPN; `None` for `http` (a `tls` table there is an error) or after an error.
pub(super) fn upstream_tls(
    upstream: &Table,
    https: bool,
    host: &str,
    protocol: Protocol,
    path: &str,
    errors: &mut Errors,
) -> Option<Arc<UpstreamTls>> {
    let key = join(path, "tls");
    let empty = Table::new();
    let table = match upstream.get("tls") {
        None => &empty,
        Some(Value::Table(t)) => t,
        Some(other) => {
            errors.push(
                &key,
                format_args!("expected a table, found {}", type_name(other)),
            );
            return None;
        }
    };
    if !https {
        if upstream.contains_key("tls") {
            errors.push(&key, "needs an https:// url");
        }
        return None;
    }
    errors.unknown_keys(table, TLS_KEYS, &key);
    let before = errors.0.len();

    let mut roots = RootCertStore::empty();
    let system_roots = boolean(table, "system_roots", &key, errors).unwrap_or(true);
    if system_roots {
        // Unreadable system certificates are skipped, as every TLS client does.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
    }
    if let Some(file) = string(table, "ca_file", &key, errors) {
        match certificates(file) {
            Ok(certs) => {
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    errors.push(
                        &join(&key, "ca_file"),
                        format_args!("{file:?} holds no usable CA certificate"),
                    );
                }
            }
            Err(why) => errors.push(&join(&key, "ca_file"), why),
        }
    }
    if roots.is_empty() && errors.0.len() == before {
        errors.push(
            &key,
            "no root certificate to trust (the system has none here): give ca_file",
        );
    }

    let name_text = string(table, "server_name", &key, errors)
        .unwrap_or_else(|| host.trim_start_matches('[').trim_end_matches(']'));
    let server_name = match ServerName::try_from(name_text.to_string()) {
        Ok(name) => Some(name),
        Err(e) => {
            errors.push(
                &join(&key, "server_name"),
                format_args!("invalid value {name_text:?}: {e}"),
            );
            None
        }
    };

    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|b| b.with_root_certificates(roots));
    let builder = match builder {
        Ok(b) => b,
        Err(e) => {
            errors.push(&key, e);
            return None;
        }
    };
    let cert = string(table, "client_cert", &key, errors);
    let private_key = string(table, "client_key", &key, errors);
    let config = match (cert, private_key) {
        (None, None) => Some(builder.with_no_client_auth()),
        (Some(cert), Some(private_key)) => client_auth(builder, cert, private_key, &key, errors),
        (Some(_), None) => {
            errors.push(&join(&key, "client_key"), "missing (client_cert needs it)");
            None
        }
        (None, Some(_)) => {
            errors.push(&join(&key, "client_cert"), "missing (client_key needs it)");
            None
        }
    };
    if errors.0.len() != before {
        return None;
    }
    let mut config = config?;
    config.alpn_protocols = protocol.alpn();
    Some(Arc::new(UpstreamTls::new(config, server_name?)))
}

fn certificates(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("cannot read {file:?}: {e}"))?
        .collect();
    let certs = certs.map_err(|e| format!("{file:?} is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{file:?} holds no PEM certificate"));
    }
    Ok(certs)
}

fn client_auth(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>,
    cert: &str,
    private_key: &str,
    key: &str,
    errors: &mut Errors,
) -> Option<rustls::ClientConfig> {
    let chain = match certificates(cert) {
        Ok(chain) => chain,
        Err(why) => {
            errors.push(&join(key, "client_cert"), why);
            return None;
        }
    };
    let secret = match PrivateKeyDer::from_pem_file(private_key) {
        Ok(secret) => secret,
        Err(e) => {
            errors.push(
                &join(key, "client_key"),
                format_args!("cannot read a PEM private key from {private_key:?}: {e}"),
            );
            return None;
        }
    };
    match builder.with_client_auth_cert(chain, secret) {
        Ok(config) => Some(config),
        Err(e) => {
            errors.push(
                &join(key, "client_key"),
                format_args!("does not fit client_cert: {e}"),
            );
            None
        }
    }
}

const LISTENER_KEYS: &[&str] = &["cert", "key"];

/// `[tls]`: the listener speaks HTTPS with `cert` (a PEM chain) and `key` (its PEM
/// private key); `None` without the table (plain HTTP) or after an error.
pub(super) fn listener_tls(root: &Table, errors: &mut Errors) -> Option<ListenerTls> {
    let table = match root.get("tls")? {
        Value::Table(t) => t,
        other => {
            errors.push(
                "tls",
                format_args!("expected a table, found {}", type_name(other)),
            );
            return None;
        }
    };
    errors.unknown_keys(table, LISTENER_KEYS, "tls");
    let before = errors.0.len();
    let cert = string(table, "cert", "tls", errors);
    let key = string(table, "key", "tls", errors);
    for (name, value) in [("cert", cert), ("key", key)] {
        if value.is_none() && !table.contains_key(name) {
            errors.push(&join("tls", name), "missing");
        }
    }
    let chain = match cert.map(certificates)? {
        Ok(chain) => chain,
        Err(why) => {
            errors.push("tls.cert", why);
            return None;
        }
    };
    let key_path = key?;
    let secret = match PrivateKeyDer::from_pem_file(key_path) {
        Ok(secret) => secret,
        Err(e) => {
            errors.push(
                "tls.key",
                format_args!("cannot read a PEM private key from {key_path:?}: {e}"),
            );
            return None;
        }
    };
    if errors.0.len() != before {
        return None;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let signing = match provider.key_provider.load_private_key(secret) {
        Ok(signing) => signing,
        Err(e) => {
            errors.push("tls.key", format_args!("cannot be used: {e}"));
            return None;
        }
    };
    let key = CertifiedKey::new(chain, signing);
    if let Err(e) = key.keys_match() {
        errors.push("tls.key", format_args!("does not fit tls.cert: {e}"));
        return None;
    }
    let cert = Arc::new(ListenerCert::new(Arc::new(key)));
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_no_client_auth().with_cert_resolver(cert.clone()));
    match config {
        Ok(mut config) => {
            // HTTP/2 first, for the clients that speak it (gRPC needs it).
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Some(ListenerTls {
                server: Arc::new(config),
                cert,
            })
        }
        Err(e) => {
            errors.push("tls", e);
            None
        }
    }
}
