//! The Toxiproxy API client lockjaw drives faults with: one trait covering
//! every endpoint ([`ToxiproxyApi`]), an implementation over reqwest
//! ([`HttpClient`]), and typed errors that never panic and say what to do.
//!
//! The same client talks to the embedded server and to an external
//! Toxiproxy 2.x (`--toxiproxy http://host:8474`). Updates use `POST`, which
//! every 2.x server accepts (newer ones also take `PATCH`).

use super::model::{ErrorBody, NewProxy, Populated, Proxy, ProxyUpdate, Toxic, ToxicUpdate};
use async_trait::async_trait;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Errors of the Toxiproxy client. Each message names the server and the
/// proxy or toxic at fault and ends with a hint where one helps.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("bad Toxiproxy URL {url:?}: {reason} (hint: use http://HOST:PORT, e.g. http://127.0.0.1:8474)")]
    BadUrl { url: String, reason: String },
    #[error(
        "cannot reach Toxiproxy at {url}: {source} (hint: start one with `lockjaw toxiproxy --port PORT`, \
         fix the --toxiproxy URL, or leave --toxiproxy out to use the embedded server)"
    )]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("Toxiproxy at {url} has no proxy named {proxy:?} (hint: list them with `curl {url}/proxies`)")]
    ProxyNotFound { url: String, proxy: String },
    #[error("proxy {proxy:?} at {url} has no toxic named {toxic:?} (hint: list them with `curl {url}/proxies/{proxy}/toxics`)")]
    ToxicNotFound {
        url: String,
        proxy: String,
        toxic: String,
    },
    #[error("Toxiproxy at {url} already has a proxy named {proxy:?} (hint: delete it first, or use populate to replace it)")]
    ProxyExists { url: String, proxy: String },
    #[error("proxy {proxy:?} at {url} already has a toxic named {toxic:?} (hint: remove it first or choose another name)")]
    ToxicExists {
        url: String,
        proxy: String,
        toxic: String,
    },
    #[error("Toxiproxy at {url} cannot listen for proxy {proxy:?}: {message} (hint: the port is in use; choose a free one or port 0)")]
    PortInUse {
        url: String,
        proxy: String,
        message: String,
    },
    #[error("Toxiproxy at {url} refused {method} {path}: {message} (HTTP {status})")]
    Api {
        url: String,
        method: Method,
        path: String,
        status: u16,
        message: String,
    },
    #[error("Toxiproxy at {url} answered {method} {path} with something unexpected: {detail} (hint: is this a Toxiproxy 2.x server?)")]
    BadResponse {
        url: String,
        method: Method,
        path: String,
        detail: String,
    },
    #[error("{method} {path} to Toxiproxy at {url} failed: {source}")]
    Http {
        url: String,
        method: Method,
        path: String,
        #[source]
        source: reqwest::Error,
    },
}

impl ClientError {
    /// The proxy or toxic named does not exist (healing treats this as done).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ClientError::ProxyNotFound { .. } | ClientError::ToxicNotFound { .. }
        )
    }

    /// A proxy or toxic of that name already exists.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            ClientError::ProxyExists { .. } | ClientError::ToxicExists { .. }
        )
    }
}

/// Every endpoint of the Toxiproxy 2.x API. Implementations never panic.
#[async_trait]
pub trait ToxiproxyApi: Send + Sync {
    /// The server's base URL.
    fn url(&self) -> &str;
    /// `GET /version`.
    async fn version(&self) -> Result<String, ClientError>;
    /// `GET /proxies`.
    async fn proxies(&self) -> Result<BTreeMap<String, Proxy>, ClientError>;
    /// `POST /proxies`.
    async fn create_proxy(&self, proxy: &NewProxy) -> Result<Proxy, ClientError>;
    /// `POST /populate`: create or replace these proxies.
    async fn populate(&self, proxies: &[NewProxy]) -> Result<Vec<Proxy>, ClientError>;
    /// `GET /proxies/{name}`.
    async fn proxy(&self, name: &str) -> Result<Proxy, ClientError>;
    /// `POST /proxies/{name}`: change listen, upstream or enabled.
    async fn update_proxy(&self, name: &str, update: &ProxyUpdate) -> Result<Proxy, ClientError>;
    /// `DELETE /proxies/{name}`.
    async fn delete_proxy(&self, name: &str) -> Result<(), ClientError>;
    /// `GET /proxies/{proxy}/toxics`.
    async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>, ClientError>;
    /// `POST /proxies/{proxy}/toxics`.
    async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic, ClientError>;
    /// `GET /proxies/{proxy}/toxics/{name}`.
    async fn toxic(&self, proxy: &str, name: &str) -> Result<Toxic, ClientError>;
    /// `POST /proxies/{proxy}/toxics/{name}`.
    async fn update_toxic(
        &self,
        proxy: &str,
        name: &str,
        update: &ToxicUpdate,
    ) -> Result<Toxic, ClientError>;
    /// `DELETE /proxies/{proxy}/toxics/{name}`.
    async fn remove_toxic(&self, proxy: &str, name: &str) -> Result<(), ClientError>;
    /// `POST /reset`: enable every proxy and remove every toxic.
    async fn reset(&self) -> Result<(), ClientError>;

    /// Enable or disable a proxy. Disabling closes its connections and
    /// refuses new ones.
    async fn set_enabled(&self, proxy: &str, enabled: bool) -> Result<Proxy, ClientError> {
        self.update_proxy(proxy, &ProxyUpdate::enabled(enabled))
            .await
    }

    /// Close every connection of a proxy and keep serving new ones
    /// (disable, then enable). On the embedded server, once the disable
    /// returns no byte held by a toxic of that proxy is delivered any more.
    async fn cut_connections(&self, proxy: &str) -> Result<(), ClientError> {
        self.set_enabled(proxy, false).await?;
        self.set_enabled(proxy, true).await?;
        Ok(())
    }
}

/// What a request is about, to turn 404/409/500 into the right error.
#[derive(Clone, Copy, Default)]
struct Subject<'a> {
    proxy: &'a str,
    toxic: Option<&'a str>,
}

/// [`ToxiproxyApi`] over HTTP with reqwest.
#[derive(Clone, Debug)]
pub struct HttpClient {
    base: Url,
    url: String,
    http: reqwest::Client,
}

impl HttpClient {
    /// A client for the server at `url` (`http://host:port`; a bare
    /// `host:port` is taken as http).
    pub fn new(url: &str) -> Result<Self, ClientError> {
        let bad = |reason: String| ClientError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let full = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        let base = Url::parse(&full).map_err(|e| bad(e.to_string()))?;
        if base.scheme() != "http" {
            return Err(bad(format!("scheme {:?} is not supported", base.scheme())));
        }
        if base.host_str().is_none() {
            return Err(bad("no host".to_string()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let url = full.trim_end_matches('/').to_string();
        Ok(HttpClient { base, url, http })
    }

    fn endpoint(&self, segments: &[&str]) -> Url {
        let mut u = self.base.clone();
        if let Ok(mut path) = u.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        u
    }

    /// Send a request; return the status and body of a 2xx answer, or the
    /// typed error for anything else.
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Vec<u8>>,
        subject: Subject<'_>,
    ) -> Result<Vec<u8>, ClientError> {
        let url = self.endpoint(segments);
        let path = url.path().to_string();
        let mut req = self.http.request(method.clone(), url);
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b);
        }
        let transport = |source: reqwest::Error| {
            if source.is_connect() {
                ClientError::Unreachable {
                    url: self.url.clone(),
                    source,
                }
            } else {
                ClientError::Http {
                    url: self.url.clone(),
                    method: method.clone(),
                    path: path.clone(),
                    source,
                }
            }
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(transport)?.to_vec();
        if status.is_success() {
            return Ok(bytes);
        }
        Err(self.api_error(method, path, status, &bytes, subject))
    }

    fn api_error(
        &self,
        method: Method,
        path: String,
        status: StatusCode,
        body: &[u8],
        s: Subject<'_>,
    ) -> ClientError {
        let message = serde_json::from_slice::<ErrorBody>(body)
            .map(|e| e.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).trim().to_string());
        let url = self.url.clone();
        let (proxy, lower) = (s.proxy.to_string(), message.to_ascii_lowercase());
        match (status.as_u16(), s.toxic) {
            (404, Some(t)) if !lower.contains("proxy") => ClientError::ToxicNotFound {
                url,
                proxy,
                toxic: t.to_string(),
            },
            (404, _) if !s.proxy.is_empty() => ClientError::ProxyNotFound { url, proxy },
            (409, Some(t)) => ClientError::ToxicExists {
                url,
                proxy,
                toxic: t.to_string(),
            },
            (409, None) if !s.proxy.is_empty() => ClientError::ProxyExists { url, proxy },
            (500, _) if lower.contains("in use") => ClientError::PortInUse {
                url,
                proxy,
                message,
            },
            (code, _) => ClientError::Api {
                url,
                method,
                path,
                status: code,
                message,
            },
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Vec<u8>>,
        subject: Subject<'_>,
    ) -> Result<T, ClientError> {
        let bytes = self.send(method.clone(), segments, body, subject).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::BadResponse {
            url: self.url.clone(),
            method,
            path: self.endpoint(segments).path().to_string(),
            detail: e.to_string(),
        })
    }
}

/// Encode a request body; our own types always serialize.
fn body<T: Serialize + ?Sized>(value: &T) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(value).unwrap_or_default())
}

fn proxy_subject(proxy: &str) -> Subject<'_> {
    Subject { proxy, toxic: None }
}

fn toxic_subject<'a>(proxy: &'a str, toxic: &'a str) -> Subject<'a> {
    Subject {
        proxy,
        toxic: Some(toxic),
    }
}

#[derive(Serialize)]
struct Empty {}

#[async_trait]
impl ToxiproxyApi for HttpClient {
    fn url(&self) -> &str {
        &self.url
    }

    async fn version(&self) -> Result<String, ClientError> {
        let bytes = self
            .send(Method::GET, &["version"], None, Subject::default())
            .await?;
        #[derive(serde::Deserialize)]
        struct V {
            version: String,
        }
        // 2.x answers JSON; very old servers answer the bare version.
        Ok(match serde_json::from_slice::<V>(&bytes) {
            Ok(v) => v.version,
            Err(_) => String::from_utf8_lossy(&bytes).trim().to_string(),
        })
    }

    async fn proxies(&self) -> Result<BTreeMap<String, Proxy>, ClientError> {
        self.call(Method::GET, &["proxies"], None, Subject::default())
            .await
    }

    async fn create_proxy(&self, proxy: &NewProxy) -> Result<Proxy, ClientError> {
        self.call(
            Method::POST,
            &["proxies"],
            body(proxy),
            proxy_subject(&proxy.name),
        )
        .await
    }

    async fn populate(&self, proxies: &[NewProxy]) -> Result<Vec<Proxy>, ClientError> {
        let done: Populated = self
            .call(
                Method::POST,
                &["populate"],
                body(proxies),
                Subject::default(),
            )
            .await?;
        Ok(done.proxies)
    }

    async fn proxy(&self, name: &str) -> Result<Proxy, ClientError> {
        self.call(Method::GET, &["proxies", name], None, proxy_subject(name))
            .await
    }

    async fn update_proxy(&self, name: &str, update: &ProxyUpdate) -> Result<Proxy, ClientError> {
        self.call(
            Method::POST,
            &["proxies", name],
            body(update),
            proxy_subject(name),
        )
        .await
    }

    async fn delete_proxy(&self, name: &str) -> Result<(), ClientError> {
        self.send(
            Method::DELETE,
            &["proxies", name],
            None,
            proxy_subject(name),
        )
        .await
        .map(drop)
    }

    async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>, ClientError> {
        self.call(
            Method::GET,
            &["proxies", proxy, "toxics"],
            None,
            proxy_subject(proxy),
        )
        .await
    }

    async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic, ClientError> {
        let subject = toxic_subject(proxy, &toxic.name);
        self.call(
            Method::POST,
            &["proxies", proxy, "toxics"],
            body(toxic),
            subject,
        )
        .await
    }

    async fn toxic(&self, proxy: &str, name: &str) -> Result<Toxic, ClientError> {
        let subject = toxic_subject(proxy, name);
        self.call(
            Method::GET,
            &["proxies", proxy, "toxics", name],
            None,
            subject,
        )
        .await
    }

    async fn update_toxic(
        &self,
        proxy: &str,
        name: &str,
        update: &ToxicUpdate,
    ) -> Result<Toxic, ClientError> {
        let subject = toxic_subject(proxy, name);
        self.call(
            Method::POST,
            &["proxies", proxy, "toxics", name],
            body(update),
            subject,
        )
        .await
    }

    async fn remove_toxic(&self, proxy: &str, name: &str) -> Result<(), ClientError> {
        let subject = toxic_subject(proxy, name);
        self.send(
            Method::DELETE,
            &["proxies", proxy, "toxics", name],
            None,
            subject,
        )
        .await
        .map(drop)
    }

    async fn reset(&self) -> Result<(), ClientError> {
        self.send(
            Method::POST,
            &["reset"],
            body(&Empty {}),
            Subject::default(),
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_normalised() {
        let c = HttpClient::new("127.0.0.1:8474").unwrap();
        assert_eq!(c.url(), "http://127.0.0.1:8474");
        assert_eq!(
            c.endpoint(&["proxies", "a b", "toxics"]).as_str(),
            "http://127.0.0.1:8474/proxies/a%20b/toxics"
        );
        let c = HttpClient::new("http://localhost:8474/").unwrap();
        assert_eq!(
            c.endpoint(&["version"]).as_str(),
            "http://localhost:8474/version"
        );
        let e = HttpClient::new("https://x:1").unwrap_err();
        assert!(e.to_string().contains("hint: use http://HOST:PORT"), "{e}");
        assert!(matches!(
            HttpClient::new("http://"),
            Err(ClientError::BadUrl { .. })
        ));
        // The runner holds the client as a trait object.
        let _: Box<dyn ToxiproxyApi> = Box::new(c);
    }
}
