//! `--client NAME|PATH|NAME@VERSION|NAME@PATH` before a run: find the
//! adapter, build a pinned version's environment on its first use, and ask
//! its handshake, so a missing, broken, unwilling or wrong-version adapter
//! stops the run before any server starts, and the run knows the library
//! it tests.

use super::protocol::AdapterSpec;
use crate::client::adapter::version::{self, Pin};
use crate::client::adapter::{self, Answer, Env, Hello};
use crate::service::System;
use crate::workload::Workload;

/// The adapter's answer for `system`: `Ok(Ok(spec))` it serves it,
/// `Ok(Err(why))` it declares the system unsupported, `Err` it cannot be
/// run or answered badly (or, asked for a version, ran another).
/// `progress`: say so on stderr while a version's environment is built.
pub fn ask(
    name: &str,
    system: System,
    w: &Workload,
    endpoints: Option<&[String]>,
    auth: &crate::auth::Auth,
    progress: bool,
) -> Result<Result<AdapterSpec, String>, String> {
    let spec = version::parse(name)?;
    let path = adapter::resolve(&spec.adapter)?;
    let path =
        std::path::absolute(&path).map_err(|e| format!("adapter {}: {e}", path.display()))?;
    let mut env = pinned_env(name, &spec.pin, &path, progress)?;
    // The protocol helpers, for an adapter kept outside clients/.
    env.extend(adapter::helpers::env()?);
    // The adapter must not contact the servers before its first request:
    // before a local cluster exists these are only where it will be.
    let eps = endpoints.map(<[String]>::to_vec).unwrap_or_else(|| {
        (0..system.default_nodes())
            .map(|i| format!("127.0.0.1:{}", usize::from(system.default_base_port()) + i))
            .collect()
    });
    let mut hello = Hello::new(system.name(), eps, &w.lock_key, w.ttl_ms);
    hello.op_timeout_ms = w.op_timeout_ms;
    // Paths and names only: the adapter has not said yet that it takes them.
    hello.auth = adapter::Credentials::of(auth).map(adapter::Credentials::without_secrets);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    Ok(match rt.block_on(adapter::query(&path, &env, &hello))? {
        Answer::Offer(offer) => {
            if let Pin::Version(v) = &spec.pin {
                version::check_version(name, v, &offer.library, &offer.version)?;
            }
            if hello.auth.is_some() && !offer.auth {
                return Err(format!(
                    "adapter {name} does not take --auth: it would connect without the \
                     credentials (hint: docs/adapters.md lists the adapters that do)"
                ));
            }
            Ok(AdapterSpec { path, offer, env })
        }
        Answer::Unsupported(why) => Err(why),
    })
}

/// The variables a pin sets, a version's environment built first (with a
/// progress line when it is not built yet).
fn pinned_env(
    name: &str,
    pin: &Pin,
    path: &std::path::Path,
    progress: bool,
) -> Result<Env, String> {
    let Pin::Version(v) = pin else {
        return Ok(version::env(pin, None));
    };
    let vd = version::version_dir(name, path, v)?;
    if version::is_built(&vd) {
        // The script still runs: it waits for a build another run holds.
        version::build(name, path, &vd)?;
    } else {
        let bar = super::progress::Progress::new(progress);
        let phase = bar.phase(&format!(
            "building the environment of {name} in {} (first use; this can take a minute)",
            vd.display()
        ));
        let r = version::build(name, path, &vd);
        phase.done(if r.is_ok() { "built" } else { "failed" });
        r?;
    }
    Ok(version::env(pin, Some(&vd)))
}

/// [`ask`] for a run: an unsupported system is an error too.
pub fn preflight(
    name: &str,
    system: System,
    w: &Workload,
    endpoints: Option<&[String]>,
    auth: &crate::auth::Auth,
    progress: bool,
) -> Result<AdapterSpec, String> {
    ask(name, system, w, endpoints, auth, progress)?.map_err(|why| {
        format!(
            "--client {name}: the adapter declares --system {system} unsupported: {why} \
             (hint: docs/adapters.md lists which systems each shipped adapter serves)"
        )
    })
}
