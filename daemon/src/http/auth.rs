//! Who may call what over HTTP: Host and Origin checks (DNS rebinding, CSRF), the bearer token, the dashboard's one-time login codes and its session cookies, and the middleware that applies them to every request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
use super::MAX_BODY_BYTES;
use crate::access::tokens::{TokenRecord, TokenWatch};
use crate::access::Role;

/// The dashboard's session cookie.
pub const SESSION_COOKIE: &str = "koru_session";
/// How long a login code is valid.
pub const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// A session unused this long is forgotten.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// At most this many dashboard sessions are kept; the least recently used goes first.
pub const MAX_SESSIONS: usize = 64;
/// At most this many unused login codes are kept; the oldest goes first.
pub const MAX_CODES: usize = 32;

/// How a request proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `Authorization: Bearer <token>`: a program.
    Bearer,
    /// The dashboard's session cookie: a person in a browser.
    Cookie,
}

/// Who a request is: how it proved it, the role it holds, and which token that was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub via: Via,
    pub role: Role,
    /// `default` (the token of `koru status`), a scoped token's id (`tok_…`), or `dashboard`
    /// for the session cookie.
    pub token_id: String,
    /// The scoped token's name, when it has one.
    pub token_name: Option<String>,
}

impl Caller {
    /// The default token: role drive.
    pub fn default_token() -> Self {
        Caller {
            via: Via::Bearer,
            role: Role::Drive,
            token_id: "default".into(),
            token_name: None,
        }
    }

    /// A scoped token from the token file.
    pub fn scoped(record: &TokenRecord) -> Self {
        Caller {
            via: Via::Bearer,
            role: record.role,
            token_id: record.id.clone(),
            token_name: record.name.clone(),
        }
    }

    /// A dashboard session: drive, as the login code that opened it could only be minted
    /// with a drive token.
    pub fn dashboard() -> Self {
        Caller {
            via: Via::Cookie,
            role: Role::Drive,
            token_id: "dashboard".into(),
            token_name: None,
        }
    }

    /// The controller name the daemon sees (and logs recovery actions with).
    pub fn client_name(&self) -> &'static str {
        match self.via {
            Via::Bearer => "api",
            Via::Cookie => "dashboard",
        }
    }
}

/// What a path asks of a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (health, static assets, `/login`, the page shell, which checks the cookie itself).
    Open,
    /// The bearer token only (`/mcp`, minting login codes).
    BearerOnly,
    /// The bearer token or the session cookie.
    BearerOrCookie,
}

/// The access rule of `method path`.
pub fn access(method: &Method, path: &str) -> Access {
    if path == "/mcp" || path.starts_with("/mcp/") {
        return Access::BearerOnly;
    }
    if path == "/api/v1/dashboard/codes" {
        return Access::BearerOnly;
    }
    if path == "/api/v1/health" && (method == Method::GET || method == Method::HEAD) {
        return Access::Open;
    }
    if path == "/api" || path.starts_with("/api/") {
        return Access::BearerOrCookie;
    }
    Access::Open
}

/// The `host:port` authorities that name this server: the bound address,
/// `localhost`/`127.0.0.1`/`[::1]` when it is a loopback address, and each of `names` (the
/// TLS certificate's DNS names) with the port.
pub fn allowed_authorities(addr: SocketAddr, certified: &[String]) -> Vec<String> {
    let port = addr.port();
    let mut names = vec![match addr {
        SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
        SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
    }];
    if addr.ip().is_loopback() {
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            let name = format!("{host}:{port}");
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    for host in certified {
        let name = format!("{host}:{port}");
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Compares without an early exit, so the time taken does not reveal how much matched.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Refuses a foreign Host, or an Origin that is not this server (`scheme://` and one of
/// `allowed`). Pure, for tests.
pub fn check_host_and_origin(
    headers: &HeaderMap,
    allowed: &[String],
    scheme: &str,
) -> Result<(), ApiError> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|host| allowed.iter().any(|a| a.eq_ignore_ascii_case(host))) {
        return Err(ApiError::forbidden(
            "the Host header does not name this server",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !origin_is_ours(origin.to_str().unwrap_or(""), allowed, scheme) {
            return Err(ApiError::forbidden(
                "requests from this Origin are not allowed",
            ));
        }
    }
    Ok(())
}

fn origin_is_ours(origin: &str, allowed: &[String], scheme: &str) -> bool {
    let authority = origin
        .strip_prefix(scheme)
        .and_then(|rest| rest.strip_prefix("://"))
        .unwrap_or("");
    allowed.iter().any(|a| a.eq_ignore_ascii_case(authority))
}

/// The value of the session cookie, from every `Cookie` header of the request.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
}

/// Decides who a request is, or why it is refused. `Ok(None)`: an open path, no
/// credentials needed. `is_session` says whether a cookie value is a live session; `scoped`
/// finds the scoped token a presented secret belongs to. A caller whose role is below what
/// the route needs (`roles.rs`) is refused with `forbidden_role`. Pure, for tests.
pub fn authorize(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    token: &str,
    (allowed, scheme): (&[String], &str),
    is_session: impl FnOnce(&str) -> bool,
    scoped: impl FnOnce(&str) -> Option<TokenRecord>,
) -> Result<Option<Caller>, ApiError> {
    check_host_and_origin(headers, allowed, scheme)?;
    let access = access(method, path);
    if access == Access::Open {
        return Ok(None);
    }
    let caller = identify(method, headers, token, access, is_session, scoped)?;
    let needed = super::roles::needed_role(method, path);
    if !caller.role.allows(needed) {
        return Err(ApiError::forbidden_role(
            &format!("{method} {path}"),
            needed,
            &caller,
        ));
    }
    Ok(Some(caller))
}

/// The caller behind a request's bearer token or cookie.
fn identify(
    method: &Method,
    headers: &HeaderMap,
    token: &str,
    access: Access,
    is_session: impl FnOnce(&str) -> bool,
    scoped: impl FnOnce(&str) -> Option<TokenRecord>,
) -> Result<Caller, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or("").strip_prefix("Bearer "));
    match presented {
        Some(Some(given)) => {
            let given = given.trim();
            if same_secret(given.as_bytes(), token.as_bytes()) {
                return Ok(Caller::default_token());
            }
            return match scoped(given) {
                Some(record) => Ok(Caller::scoped(&record)),
                None => Err(ApiError::unauthorized(
                    "wrong or revoked bearer token (`koru status` shows the default one; `koru token ls` lists the scoped ones)",
                )),
            };
        }
        Some(None) => {
            return Err(ApiError::unauthorized(
                "the Authorization header must be `Bearer <token>` (`koru status` shows the token)",
            ))
        }
        None => {}
    }
    if access == Access::BearerOrCookie {
        if let Some(cookie) = session_cookie(headers) {
            if !is_session(cookie) {
                return Err(ApiError::unauthorized(
                    "the dashboard session has expired; run `koru dashboard` to log in again",
                ));
            }
            let safe = method == Method::GET || method == Method::HEAD || method == Method::OPTIONS;
            if !safe && headers.get(header::ORIGIN).is_none() {
                return Err(ApiError::forbidden(
                    "a dashboard request that changes something must carry this server's Origin",
                ));
            }
            return Ok(Caller::dashboard());
        }
    }
    Err(ApiError::unauthorized(
        "send `Authorization: Bearer <token>` (the token is in `koru status`)",
    ))
}

/// `bytes` random bytes as lowercase hex, from the operating system's generator.
pub fn random_hex(bytes: usize) -> Result<String, ApiError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer)
        .map_err(|error| ApiError::internal(format!("no randomness from the OS: {error}")))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// One-time login codes: each valid for [`CODE_LIFETIME`] and redeemable once.
#[derive(Debug, Default)]
pub struct CodeStore {
    /// code → when it expires.
    codes: HashMap<String, Instant>,
}

impl CodeStore {
    /// Keeps `code`, valid until `now + CODE_LIFETIME`; returns that instant.
    pub fn insert(&mut self, code: String, now: Instant) -> Instant {
        self.codes.retain(|_, expires| *expires > now);
        while self.codes.len() >= MAX_CODES {
            let Some(oldest) = self
                .codes
                .iter()
                .min_by_key(|(_, expires)| **expires)
                .map(|(code, _)| code.clone())
            else {
                break;
            };
            self.codes.remove(&oldest);
        }
        let expires = now + CODE_LIFETIME;
        self.codes.insert(code, expires);
        expires
    }

    /// True, once, for a code that was minted and has not expired.
    pub fn redeem(&mut self, code: &str, now: Instant) -> bool {
        match self.codes.remove(code) {
            Some(expires) => expires > now,
            None => false,
        }
    }
}

/// Dashboard sessions: cookie value → last use; bounded, forgotten after [`SESSION_IDLE`].
#[derive(Debug, Default)]
pub struct SessionStore {
    sessions: HashMap<String, Instant>,
}

impl SessionStore {
    /// Keeps a new session `id`, dropping expired ones and, past [`MAX_SESSIONS`], the
    /// least recently used.
    pub fn insert(&mut self, id: String, now: Instant) {
        self.sessions
            .retain(|_, used| now.saturating_duration_since(*used) < SESSION_IDLE);
        while self.sessions.len() >= MAX_SESSIONS {
            let Some(stalest) = self
                .sessions
                .iter()
                .min_by_key(|(_, used)| **used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            self.sessions.remove(&stalest);
        }
        self.sessions.insert(id, now);
    }

    /// True for a live session, whose idle time starts again.
    pub fn touch(&mut self, id: &str, now: Instant) -> bool {
        match self.sessions.get_mut(id) {
            Some(used) if now.saturating_duration_since(*used) < SESSION_IDLE => {
                *used = now;
                true
            }
            Some(_) => {
                self.sessions.remove(id);
                false
            }
            None => false,
        }
    }
}

/// The server's credentials and the dashboard's login state.
#[derive(Debug)]
pub struct Auth {
    token: String,
    scoped: Mutex<TokenWatch>,
    allowed: Vec<String>,
    scheme: &'static str,
    /// Where `forbidden_role` refusals go to be journaled.
    pub refusals: Option<crate::access::RefusalSink>,
    codes: Mutex<CodeStore>,
    sessions: Mutex<SessionStore>,
}

impl Auth {
    /// `tokens` is the scoped token file, read again whenever it changes.
    /// `scheme` (`http` or `https`) is what a request's Origin must start with.
    pub fn new(
        token: String,
        tokens: std::path::PathBuf,
        allowed: Vec<String>,
        scheme: &'static str,
    ) -> Self {
        Auth {
            token,
            scoped: Mutex::new(TokenWatch::new(tokens)),
            allowed,
            scheme,
            refusals: None,
            codes: Mutex::default(),
            sessions: Mutex::default(),
        }
    }

    pub fn allowed_authorities(&self) -> &[String] {
        &self.allowed
    }

    /// A new login code and when it expires.
    pub fn mint_code(&self) -> Result<(String, Instant), ApiError> {
        let code = random_hex(16)?;
        let expires = lock(&self.codes).insert(code.clone(), Instant::now());
        Ok((code, expires))
    }

    /// Exchanges a login code for a new session id (the cookie's value).
    pub fn redeem_code(&self, code: &str) -> Result<Option<String>, ApiError> {
        if !lock(&self.codes).redeem(code, Instant::now()) {
            return Ok(None);
        }
        let session = random_hex(32)?;
        lock(&self.sessions).insert(session.clone(), Instant::now());
        Ok(Some(session))
    }

    /// True when the request carries a live session cookie.
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        session_cookie(headers).is_some_and(|id| lock(&self.sessions).touch(id, Instant::now()))
    }

    fn authorize(&self, request: &Request) -> Result<Option<Caller>, ApiError> {
        authorize(
            request.method(),
            request.uri().path(),
            request.headers(),
            &self.token,
            (&self.allowed, self.scheme),
            |id| lock(&self.sessions).touch(id, Instant::now()),
            |presented| lock(&self.scoped).lookup(presented),
        )
    }
}

/// Locks a store; a panic elsewhere while it was held leaves it usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The journal's record of a `forbidden_role` refusal (from its detail), else `None`.
fn refusal_of(error: &ApiError, request: &Request) -> Option<crate::access::Refusal> {
    if error.code() != koru_protocol::ErrorCode::ForbiddenRole.as_str() {
        return None;
    }
    let detail = error.body.detail.as_ref()?;
    let role = |key: &str| match detail[key].as_str()? {
        "observe" => Some(Role::Observe),
        "drive" => Some(Role::Drive),
        _ => None,
    };
    Some(crate::access::Refusal {
        door: "http_api",
        token_id: detail["token"].as_str()?.to_string(),
        token_name: detail["token_name"].as_str().map(str::to_string),
        held: role("held")?,
        needed: role("needed")?,
        asked: format!("{} {}", request.method(), request.uri().path()),
    })
}

/// The middleware in front of every route: refuses, or lets the request through with its
/// [`Caller`] in the request's extensions.
pub async fn guard(State(auth): State<Arc<Auth>>, mut request: Request, next: Next) -> Response {
    match auth.authorize(&request) {
        Ok(caller) => {
            let too_large = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|length| length > MAX_BODY_BYTES as u64);
            if too_large && request.uri().path().starts_with("/api/") {
                super::body::drain(request.into_body()).await;
                return ApiError::body_too_large(MAX_BODY_BYTES).into_response();
            }
            if let Some(caller) = caller {
                request.extensions_mut().insert(crate::access::Grant {
                    role: caller.role,
                    token_id: caller.token_id.clone(),
                    token_name: caller.token_name.clone(),
                });
                request.extensions_mut().insert(caller);
            }
            next.run(request).await
        }
        Err(error) => {
            if let (Some(sink), Some(refusal)) = (&auth.refusals, refusal_of(&error, &request)) {
                sink.report(refusal);
            }
            tracing::warn!(
                status = %error.status,
                method = %request.method(),
                uri = %request.uri().path(),
                "HTTP request refused: {}",
                error.body.message
            );
            error.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    const TOKEN: &str = "t0ken-t0ken-t0ken";

    fn outcome(
        method: Method,
        path: &str,
        pairs: &[(&'static str, &str)],
    ) -> Result<Option<Via>, u16> {
        let allowed = allowed_authorities("127.0.0.1:8765".parse().unwrap(), &[]);
        authorize(
            &method,
            path,
            &headers(pairs),
            TOKEN,
            (&allowed, "http"),
            |id| id == "live",
            scoped,
        )
        .map(|caller| caller.map(|c| c.via))
        .map_err(|e| e.status.as_u16())
    }

    /// The scoped tokens of these tests: `observer-secret` (observe), `driver-secret` (drive).
    fn scoped(presented: &str) -> Option<TokenRecord> {
        let role = match presented {
            "observer-secret" => Role::Observe,
            "driver-secret" => Role::Drive,
            _ => return None,
        };
        Some(TokenRecord {
            id: format!("tok_{presented}"),
            name: Some("ci".into()),
            role,
            sha256: crate::access::tokens::digest(presented),
            created_ms: 0,
        })
    }

    #[test]
    fn loopback_servers_answer_to_their_local_names_only() {
        let allowed = allowed_authorities("127.0.0.1:8765".parse().unwrap(), &[]);
        assert_eq!(allowed, ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"]);
        let host = ("host", "localhost:8765");
        let bearer = ("authorization", "Bearer t0ken-t0ken-t0ken");
        let get = |pairs: &[(&'static str, &str)]| outcome(Method::POST, "/mcp", pairs);
        assert_eq!(get(&[host, bearer]), Ok(Some(Via::Bearer)));
        assert_eq!(
            get(&[host, bearer, ("origin", "http://127.0.0.1:8765")]),
            Ok(Some(Via::Bearer))
        );
        assert_eq!(
            get(&[("host", "evil.example:8765"), bearer]),
            Err(403),
            "DNS rebinding"
        );
        assert_eq!(
            get(&[host, bearer, ("origin", "http://evil.example")]),
            Err(403)
        );
        assert_eq!(get(&[host, bearer, ("origin", "null")]), Err(403));
        assert_eq!(get(&[host]), Err(401));
        assert_eq!(get(&[host, ("authorization", "Bearer wrong")]), Err(401));
        assert_eq!(
            get(&[host, ("authorization", "t0ken-t0ken-t0ken")]),
            Err(401)
        );
        // /mcp takes no cookie.
        assert_eq!(get(&[host, ("cookie", "koru_session=live")]), Err(401));
    }

    #[test]
    fn open_paths_bearer_only_paths_and_cookie_rules() {
        let host = ("host", "127.0.0.1:8765");
        let cookie = ("cookie", "theme=dark; koru_session=live");
        let origin = ("origin", "http://127.0.0.1:8765");
        assert_eq!(outcome(Method::GET, "/api/v1/health", &[host]), Ok(None));
        assert_eq!(outcome(Method::GET, "/assets/app.js", &[host]), Ok(None));
        assert_eq!(outcome(Method::GET, "/login", &[host]), Ok(None));
        assert_eq!(
            outcome(Method::GET, "/api/v1/health", &[("host", "evil:1")]),
            Err(403)
        );
        assert_eq!(outcome(Method::GET, "/api/v1/sessions", &[host]), Err(401));
        assert_eq!(
            outcome(Method::GET, "/api/v1/sessions", &[host, cookie]),
            Ok(Some(Via::Cookie))
        );
        assert_eq!(
            outcome(
                Method::GET,
                "/api/v1/sessions",
                &[host, ("cookie", "koru_session=dead")]
            ),
            Err(401)
        );
        assert_eq!(
            outcome(Method::POST, "/api/v1/drives", &[host, cookie]),
            Err(403)
        );
        assert_eq!(
            outcome(Method::POST, "/api/v1/drives", &[host, cookie, origin]),
            Ok(Some(Via::Cookie))
        );
        assert_eq!(
            outcome(
                Method::POST,
                "/api/v1/dashboard/codes",
                &[host, cookie, origin]
            ),
            Err(401),
            "codes are for the bearer token only"
        );
        assert_eq!(
            outcome(
                Method::POST,
                "/api/v1/dashboard/codes",
                &[host, ("authorization", "Bearer t0ken-t0ken-t0ken")]
            ),
            Ok(Some(Via::Bearer))
        );
    }

    #[test]
    fn scoped_tokens_act_within_their_role_and_unknown_ones_are_unauthorized() {
        let host = ("host", "127.0.0.1:8765");
        let observer = ("authorization", "Bearer observer-secret");
        let driver = ("authorization", "Bearer driver-secret");
        assert_eq!(
            outcome(Method::GET, "/api/v1/sessions", &[host, observer]),
            Ok(Some(Via::Bearer))
        );
        assert_eq!(
            outcome(Method::POST, "/mcp", &[host, observer]),
            Ok(Some(Via::Bearer))
        );
        assert_eq!(
            outcome(Method::POST, "/api/v1/drives", &[host, observer]),
            Err(403)
        );
        assert_eq!(
            outcome(Method::POST, "/api/v1/dashboard/codes", &[host, observer]),
            Err(403)
        );
        assert_eq!(
            outcome(Method::POST, "/api/v1/drives", &[host, driver]),
            Ok(Some(Via::Bearer))
        );
        assert_eq!(
            outcome(
                Method::GET,
                "/api/v1/sessions",
                &[host, ("authorization", "Bearer revoked-secret")]
            ),
            Err(401)
        );
        let allowed = allowed_authorities("127.0.0.1:8765".parse().unwrap(), &[]);
        let refusal = authorize(
            &Method::POST,
            "/api/v1/recovery",
            &headers(&[host, observer]),
            TOKEN,
            (&allowed, "http"),
            |_| false,
            scoped,
        )
        .unwrap_err();
        assert_eq!(refusal.code(), "forbidden_role");
        assert_eq!(
            refusal.body.message,
            "POST /api/v1/recovery needs the drive role; this caller holds the observe role"
        );
        assert_eq!(
            refusal.body.detail,
            Some(
                serde_json::json!({"needed": "drive", "held": "observe", "token": "tok_observer-secret", "token_name": "ci"})
            )
        );
    }

    #[test]
    fn under_https_the_origin_must_say_https() {
        let allowed = allowed_authorities("127.0.0.1:8765".parse().unwrap(), &[]);
        let check = |origin: &str, scheme: &str| {
            check_host_and_origin(
                &headers(&[("host", "127.0.0.1:8765"), ("origin", origin)]),
                &allowed,
                scheme,
            )
            .is_ok()
        };
        assert!(check("https://127.0.0.1:8765", "https"));
        assert!(check("https://localhost:8765", "https"));
        assert!(!check("http://127.0.0.1:8765", "https"));
        assert!(!check("https://127.0.0.1:8765", "http"));
        assert!(check("http://127.0.0.1:8765", "http"));
        let remote =
            allowed_authorities("192.0.2.7:8443".parse().unwrap(), &["box.example".into()]);
        assert_eq!(remote, ["192.0.2.7:8443", "box.example:8443"]);
        assert!(check_host_and_origin(
            &headers(&[
                ("host", "box.example:8443"),
                ("origin", "https://box.example:8443")
            ]),
            &remote,
            "https"
        )
        .is_ok());
        assert!(check_host_and_origin(
            &headers(&[("host", "evil.example:8443")]),
            &remote,
            "https"
        )
        .is_err());
        assert!(check_host_and_origin(
            &headers(&[
                ("host", "192.0.2.7:8443"),
                ("origin", "https://192.0.2.7:8443")
            ]),
            &remote,
            "https"
        )
        .is_ok());
    }

    #[test]
    fn the_session_cookie_is_found_among_others_and_in_several_headers() {
        assert_eq!(
            session_cookie(&headers(&[("cookie", "koru_session=abc")])),
            Some("abc")
        );
        assert_eq!(
            session_cookie(&headers(&[
                ("cookie", "a=1"),
                ("cookie", "b=2; koru_session=xyz ")
            ])),
            Some("xyz")
        );
        assert_eq!(
            session_cookie(&headers(&[("cookie", "koru_sessionx=abc")])),
            None
        );
        assert_eq!(
            session_cookie(&headers(&[("cookie", "koru_session=")])),
            None
        );
        assert_eq!(session_cookie(&headers(&[("cookie", "garbage")])), None);
        assert_eq!(session_cookie(&HeaderMap::new()), None);
    }

    #[test]
    fn codes_are_single_use_and_expire() {
        let start = Instant::now();
        let mut codes = CodeStore::default();
        let expires = codes.insert("c1".into(), start);
        assert_eq!(expires, start + CODE_LIFETIME);
        assert!(!codes.redeem("unknown", start));
        assert!(codes.redeem("c1", start + Duration::from_secs(59)));
        assert!(
            !codes.redeem("c1", start + Duration::from_secs(59)),
            "used once"
        );
        codes.insert("c2".into(), start);
        assert!(!codes.redeem("c2", start + CODE_LIFETIME), "expired");
        for n in 0..MAX_CODES + 5 {
            codes.insert(format!("n{n}"), start + Duration::from_millis(n as u64));
        }
        assert_eq!(codes.codes.len(), MAX_CODES);
        assert!(!codes.redeem("n0", start), "the oldest went first");
        assert!(codes.redeem(&format!("n{}", MAX_CODES + 4), start));
    }

    #[test]
    fn sessions_expire_when_idle_and_are_bounded() {
        let start = Instant::now();
        let mut sessions = SessionStore::default();
        sessions.insert("s1".into(), start);
        let later = start + SESSION_IDLE - Duration::from_secs(1);
        assert!(sessions.touch("s1", later));
        assert!(
            sessions.touch("s1", later + SESSION_IDLE - Duration::from_secs(1)),
            "use renews"
        );
        assert!(!sessions.touch("s1", later + SESSION_IDLE * 3));
        assert!(!sessions.touch("nope", start));
        for n in 0..MAX_SESSIONS + 3 {
            sessions.insert(format!("n{n}"), start + Duration::from_millis(n as u64));
        }
        assert_eq!(sessions.sessions.len(), MAX_SESSIONS);
        assert!(!sessions.touch("n0", start + Duration::from_secs(1)));
        assert!(sessions.touch(
            &format!("n{}", MAX_SESSIONS + 2),
            start + Duration::from_secs(1)
        ));
    }

    #[test]
    fn random_values_are_hex_of_the_asked_length_and_differ() {
        let a = random_hex(32).unwrap();
        let b = random_hex(32).unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
