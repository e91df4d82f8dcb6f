//! The proxies of one embedded server and the API's semantics over them:
//! request bodies, defaults, validation order and the error each mistake
//! earns, following Shopify's Toxiproxy 2.x server.

use super::link::{Shot, ToxicEntry};
use super::loops::{self, start_checked, Listener, Who};
use super::matcher::Pattern;
use super::model::{self, Populated, Stream, ToxicKind, ToxicParseError};
use super::proxy::{next_toxic_id, resolve_listen, toxic_wire, Proxy, MAX_CONNECTIONS};
use super::tap::TapSlot;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;

/// An API error: status code and the message of `{"error", "status"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
    fn bad_body(detail: impl std::fmt::Display) -> Self {
        Self::new(400, format!("bad request body: {detail}"))
    }
    fn missing(field: &str) -> Self {
        Self::new(400, format!("missing required field: {field}"))
    }
    fn proxy_not_found() -> Self {
        Self::new(404, "proxy not found")
    }
    fn proxy_exists() -> Self {
        Self::new(409, "proxy already exists")
    }
    fn invalid_stream() -> Self {
        Self::new(
            400,
            "stream was invalid, can be either upstream or downstream",
        )
    }
    fn invalid_type() -> Self {
        Self::new(400, "invalid toxic type")
    }
    fn toxic_exists() -> Self {
        Self::new(409, "toxic already exists")
    }
    fn toxic_not_found() -> Self {
        Self::new(404, "toxic not found")
    }
    /// A listen failure (port in use, bad address): 500, as in Toxiproxy,
    /// with Go's wording (`listen tcp 127.0.0.1:3310: bind: address already
    /// in use`).
    pub(crate) fn listen(e: std::io::Error) -> Self {
        Self::new(500, e.to_string())
    }
    /// lockjaw extension: a name no request path could address again.
    fn name_too_long(what: &str, len: usize) -> Self {
        Self::new(
            400,
            format!(
                "{what} name too long: {len} bytes, at most {MAX_NAME_BYTES} \
                 (lockjaw: a longer name could not be fetched or deleted, HTTP paths are bounded)"
            ),
        )
    }
    /// lockjaw extension: a one-shot toxic acts on every connection or it
    /// would not act at all.
    fn one_shot_toxicity(kind: ToxicKind, toxicity: f32) -> Self {
        Self::new(
            400,
            format!(
                "toxicity must be 1 for {} (lockjaw: a one-shot toxic acts on the next chunk \
                 of any connection), got {toxicity}",
                kind.type_name()
            ),
        )
    }
}

/// The longest proxy or toxic name accepted (a lockjaw limit): percent-encoded,
/// `/proxies/{proxy}/toxics/{toxic}` with two such names stays under the
/// 65,534-byte request target the HTTP server parses, so every proxy and
/// toxic that can be created can be fetched and deleted.
pub const MAX_NAME_BYTES: usize = 10_000;

fn check_name(what: &str, name: &str) -> Result<(), ApiError> {
    if name.len() > MAX_NAME_BYTES {
        return Err(ApiError::name_too_long(what, name.len()));
    }
    Ok(())
}

/// Whether populate leaves an existing proxy untouched: its upstream as
/// given, its listen address after resolution (`localhost:7070` is the
/// `127.0.0.1:7070` a proxy created with it reports), as Shopify's server.
fn consistent(old: &Proxy, listen: &str, upstream: &str) -> bool {
    if old.upstream != upstream {
        return false;
    }
    if old.listen == listen {
        return true;
    }
    let new = resolve_listen(listen);
    new.is_some()
        && (new.as_deref() == Some(old.listen.as_str()) || new == resolve_listen(&old.listen))
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_body)
}

#[derive(Deserialize)]
struct ProxyBody {
    #[serde(default)]
    name: String,
    #[serde(default)]
    listen: String,
    #[serde(default)]
    upstream: String,
    enabled: Option<bool>,
}

#[derive(Deserialize)]
struct ProxyPatch {
    listen: Option<String>,
    upstream: Option<String>,
    enabled: Option<bool>,
}

#[derive(Deserialize)]
struct ToxicBody {
    #[serde(default)]
    name: String,
    #[serde(rename = "type", default)]
    kind: String,
    stream: Option<String>,
    toxicity: Option<f32>,
    attributes: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct ToxicPatch {
    attributes: Option<Map<String, Value>>,
    toxicity: Option<f32>,
}

pub(crate) struct Collection {
    proxies: BTreeMap<String, Proxy>,
    /// Where the API listens: no upstream may lead there.
    api: Option<SocketAddr>,
    /// The most connections one proxy holds ([`MAX_CONNECTIONS`]).
    max_connections: usize,
    /// The wire tap every proxy's new connections report to, if set.
    pub(crate) tap: TapSlot,
}

impl Default for Collection {
    fn default() -> Self {
        Collection {
            proxies: BTreeMap::new(),
            api: None,
            max_connections: MAX_CONNECTIONS,
            tap: TapSlot::default(),
        }
    }
}

impl Collection {
    /// The proxies of a server whose API listens on `api`, each holding at
    /// most `max_connections` connections.
    pub fn new(api: SocketAddr, max_connections: usize) -> Self {
        let api = Some(api);
        Collection {
            api,
            max_connections,
            ..Collection::default()
        }
    }

    /// A new proxy as `b` describes it, with this server's bound and tap.
    fn proxy(&self, b: &ProxyBody) -> Proxy {
        let (name, listen, up) = (b.name.clone(), b.listen.clone(), b.upstream.clone());
        Proxy::new(name, listen, up, self.max_connections, self.tap.clone())
    }

    /// Every address this server listens on (or holds) but those of the
    /// proxies named in `except`.
    fn listeners(&self, except: &[&str]) -> Vec<Listener> {
        let api = self.api.map(|addr| Listener {
            addr,
            who: Who::Api,
        });
        let proxies = self
            .proxies
            .iter()
            .filter(|(n, _)| !except.contains(&n.as_str()))
            .filter_map(|(n, p)| Listener::proxy(n, &p.listen));
        api.into_iter().chain(proxies).collect()
    }

    fn get_mut(&mut self, name: &str) -> Result<&mut Proxy, ApiError> {
        self.proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)
    }

    fn get(&self, name: &str) -> Result<&Proxy, ApiError> {
        self.proxies.get(name).ok_or_else(ApiError::proxy_not_found)
    }

    pub fn list(&self) -> BTreeMap<String, model::Proxy> {
        self.proxies
            .iter()
            .map(|(k, p)| (k.clone(), p.to_wire()))
            .collect()
    }

    pub async fn create(&mut self, body: &[u8]) -> Result<model::Proxy, ApiError> {
        let b: ProxyBody = parse(body)?;
        if b.name.is_empty() {
            return Err(ApiError::missing("name"));
        }
        if b.upstream.is_empty() {
            return Err(ApiError::missing("upstream"));
        }
        check_name("proxy", &b.name)?;
        if self.proxies.contains_key(&b.name) {
            return Err(ApiError::proxy_exists());
        }
        let others = self.listeners(&[]);
        let mut all = others.clone();
        all.extend(Listener::proxy(&b.name, &b.listen));
        loops::check(&b.name, &b.upstream, &all)?;
        let mut p = self.proxy(&b);
        if b.enabled.unwrap_or(true) {
            start_checked(&mut p, &others).await?;
        }
        let wire = p.to_wire();
        self.proxies.insert(b.name, p);
        Ok(wire)
    }

    /// Create or replace proxies; one is left as it is (toxics, connections
    /// and all) when its fields are consistent (see [`consistent`]).
    /// Validates everything before changing anything.
    pub async fn populate(&mut self, body: &[u8]) -> Result<Populated, (ApiError, Populated)> {
        let empty = || Populated {
            proxies: Vec::new(),
        };
        let items: Vec<ProxyBody> = parse(body).map_err(|e| (e, empty()))?;
        let names: Vec<&str> = items.iter().map(|b| b.name.as_str()).collect();
        let mut all = self.listeners(&names);
        all.extend(
            items
                .iter()
                .filter_map(|b| Listener::proxy(&b.name, &b.listen)),
        );
        let mut seen = HashSet::new();
        for (i, b) in items.iter().enumerate() {
            if b.name.is_empty() {
                return Err((
                    ApiError::missing(&format!("name at proxy {}", i + 1)),
                    empty(),
                ));
            }
            if b.upstream.is_empty() {
                return Err((
                    ApiError::missing(&format!("upstream at proxy {}", i + 1)),
                    empty(),
                ));
            }
            if let Err(e) =
                check_name("proxy", &b.name).and_then(|()| loops::check(&b.name, &b.upstream, &all))
            {
                return Err((e, empty()));
            }
            if !seen.insert(b.name.as_str()) {
                return Err((
                    ApiError::bad_body(format!("duplicate proxy name {:?}", b.name)),
                    empty(),
                ));
            }
        }
        let mut done = empty();
        for b in items {
            if let Some(old) = self.proxies.get(&b.name) {
                if consistent(old, &b.listen, &b.upstream) {
                    done.proxies.push(old.to_wire());
                    continue;
                }
            }
            if let Some(mut old) = self.proxies.remove(&b.name) {
                old.stop().await;
            }
            let mut p = self.proxy(&b);
            if b.enabled.unwrap_or(true) {
                if let Err(e) = start_checked(&mut p, &all).await {
                    return Err((e, done));
                }
            }
            done.proxies.push(p.to_wire());
            self.proxies.insert(b.name, p);
        }
        Ok(done)
    }

    pub fn show(&self, name: &str) -> Result<model::Proxy, ApiError> {
        Ok(self.get(name)?.to_wire())
    }

    /// Change listen/upstream (restarting the proxy) and/or enable/disable it.
    pub async fn update(&mut self, name: &str, body: &[u8]) -> Result<model::Proxy, ApiError> {
        let others = self.listeners(&[name]);
        let p = self.get_mut(name)?;
        let b: ProxyPatch = parse(body)?;
        let listen = b.listen.unwrap_or_else(|| p.listen.clone());
        let upstream = b.upstream.unwrap_or_else(|| p.upstream.clone());
        let enabled = b.enabled.unwrap_or(p.enabled);
        if listen != p.listen || upstream != p.upstream {
            let mut all = others.clone();
            all.extend(Listener::proxy(name, &listen));
            loops::check(name, &upstream, &all)?;
            p.stop().await;
            p.set_addresses(listen, upstream);
        }
        if enabled && !p.enabled {
            start_checked(p, &others).await?;
        } else if !enabled && p.enabled {
            p.stop().await;
        }
        Ok(p.to_wire())
    }

    pub async fn delete(&mut self, name: &str) -> Result<(), ApiError> {
        let mut p = self
            .proxies
            .remove(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        p.stop().await;
        Ok(())
    }

    pub fn toxics(&self, proxy: &str) -> Result<Vec<model::Toxic>, ApiError> {
        Ok(self.get(proxy)?.toxics_wire())
    }

    pub fn add_toxic(&mut self, proxy: &str, body: &[u8]) -> Result<model::Toxic, ApiError> {
        let p = self.get_mut(proxy)?;
        let b: ToxicBody = parse(body)?;
        let stream = match &b.stream {
            None => Stream::Downstream,
            Some(s) => Stream::parse(s).ok_or_else(ApiError::invalid_stream)?,
        };
        let name = if b.name.is_empty() {
            format!("{}_{}", b.kind, stream)
        } else {
            b.name
        };
        if !ToxicKind::TYPES.contains(&b.kind.as_str()) {
            return Err(ApiError::invalid_type());
        }
        check_name("toxic", &name)?;
        if p.toxic(&name).is_some() {
            return Err(ApiError::toxic_exists());
        }
        let attrs = b.attributes.unwrap_or_default();
        let kind = parse_kind(&b.kind, &attrs)?;
        let pattern = Pattern::of_kind(kind, &attrs).map_err(ApiError::bad_body)?;
        let toxicity = b.toxicity.unwrap_or(1.0);
        check_toxic(kind, toxicity)?;
        let entry = ToxicEntry {
            id: next_toxic_id(),
            rev: 0,
            name,
            stream,
            toxicity,
            kind,
            pattern,
            shot: Shot::for_kind(&kind),
        };
        let wire = toxic_wire(&entry);
        p.add_toxic(entry);
        Ok(wire)
    }

    pub fn toxic(&self, proxy: &str, toxic: &str) -> Result<model::Toxic, ApiError> {
        let t = self
            .get(proxy)?
            .toxic(toxic)
            .ok_or_else(ApiError::toxic_not_found)?;
        Ok(toxic_wire(t))
    }

    /// Merge the given attributes into the toxic's; replace toxicity if given.
    pub fn update_toxic(
        &mut self,
        proxy: &str,
        toxic: &str,
        body: &[u8],
    ) -> Result<model::Toxic, ApiError> {
        let p = self.get_mut(proxy)?;
        let old = p
            .toxic(toxic)
            .ok_or_else(ApiError::toxic_not_found)?
            .clone();
        let b: ToxicPatch = parse(body)?;
        let mut attrs = old.kind.attributes();
        if let Some(p) = &old.pattern {
            p.write(&mut attrs);
        }
        attrs.extend(b.attributes.unwrap_or_default());
        let kind = parse_kind(old.kind.type_name(), &attrs)?;
        let entry = ToxicEntry {
            rev: old.rev + 1,
            toxicity: b.toxicity.unwrap_or(old.toxicity),
            kind,
            pattern: Pattern::of_kind(kind, &attrs).map_err(ApiError::bad_body)?,
            ..old
        };
        check_toxic(entry.kind, entry.toxicity)?;
        let wire = toxic_wire(&entry);
        p.replace_toxic(entry);
        Ok(wire)
    }

    pub fn remove_toxic(&mut self, proxy: &str, toxic: &str) -> Result<(), ApiError> {
        if self.get_mut(proxy)?.remove_toxic(toxic) {
            Ok(())
        } else {
            Err(ApiError::toxic_not_found())
        }
    }

    /// Enable every proxy and remove every toxic.
    pub async fn reset(&mut self) -> Result<(), ApiError> {
        for p in self.proxies.values_mut() {
            if !p.enabled {
                p.start().await.map_err(ApiError::listen)?;
            }
            p.clear_toxics();
        }
        Ok(())
    }

    /// Stop every proxy (server shutdown).
    pub async fn shutdown(&mut self) {
        for p in self.proxies.values_mut() {
            p.stop().await;
        }
        self.proxies.clear();
    }

    /// Live connections of a proxy (diagnostics).
    pub fn connections(&self, proxy: &str) -> Option<usize> {
        self.proxies.get(proxy).map(Proxy::connections)
    }

    /// Connections a proxy closed at once for being over its bound.
    pub fn refused(&self, proxy: &str) -> Option<u64> {
        self.proxies.get(proxy).map(Proxy::refused)
    }
}

/// A toxic's values: attributes in range ([`ToxicKind::out_of_range`]), a
/// toxicity from 0 to 1 (Toxiproxy takes any number and compares it with a
/// random one), and 1 for the one-shot toxics.
fn check_toxic(kind: ToxicKind, toxicity: f32) -> Result<(), ApiError> {
    if let Some(why) = kind.out_of_range() {
        return Err(ApiError::bad_body(why));
    }
    if !(0.0..=1.0).contains(&toxicity) {
        return Err(ApiError::bad_body(format!(
            "toxicity must be from 0 to 1, got {toxicity} (lockjaw: it is the share of connections the toxic acts on)"
        )));
    }
    if kind.is_one_shot() && toxicity != 1.0 {
        return Err(ApiError::one_shot_toxicity(kind, toxicity));
    }
    Ok(())
}

fn parse_kind(kind: &str, attrs: &Map<String, Value>) -> Result<ToxicKind, ApiError> {
    ToxicKind::parse(kind, attrs).map_err(|e| match e {
        ToxicParseError::UnknownType(_) => ApiError::invalid_type(),
        bad @ ToxicParseError::BadAttribute { .. } => ApiError::bad_body(bad),
    })
}

#[cfg(test)]
#[path = "collection_tests.rs"]
mod tests;
