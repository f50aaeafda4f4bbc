//! The web dashboard's files, embedded in the binary, served with a strict Content-Security-Policy; the page shell at `/` (for a logged-in browser only), and `/login`, which trades a one-time code for the session cookie.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::auth::SESSION_COOKIE;
use super::AppState;

/// The Content-Security-Policy of every page and asset: no inline script or style.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../../assets/dashboard/index.html");

/// The files under `/assets/`: name, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/dashboard/app.css"),
    ),
];

/// A response with the security headers every page and asset carries.
fn secured(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<axum::body::Body>,
) -> Response {
    let mut response = (status, body.into()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// A small page for a person: a title and one paragraph (text only, escaped).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let body = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<link rel=\"stylesheet\" href=\"/assets/app.css\">\n</head>\n<body>\n<h1>{}</h1>\n<p>{}</p>\n</body>\n</html>\n",
        escape(title),
        escape(title),
        escape(text)
    );
    let mut response = secured(status, "text/html; charset=utf-8", body);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /`: the dashboard for a browser with a live session, else a page saying how to log in.
pub async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if !state.auth.has_session(&headers) {
        return page(
            StatusCode::UNAUTHORIZED,
            "Koru dashboard: not logged in",
            "Run `koru dashboard` in a terminal: it prints (and on a desktop opens) a one-time login link for this page.",
        );
    }
    let mut response = secured(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /assets/{name}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, bytes)) => {
            let mut response = secured(StatusCode::OK, content_type, *bytes);
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        None => page(StatusCode::NOT_FOUND, "Not found", "There is no such file."),
    }
}

/// `?code=` of `/login`.
#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    pub code: Option<String>,
}

/// `GET /login?code=…`: a fresh, unused code gets a session cookie and a redirect to `/`.
pub async fn login(State(state): State<AppState>, Query(query): Query<LoginQuery>) -> Response {
    let session = match query.code.as_deref().filter(|c| !c.is_empty()) {
        Some(code) => state.auth.redeem_code(code),
        None => Ok(None),
    };
    match session {
        Ok(Some(session)) => {
            let cookie = format!("{SESSION_COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/");
            let mut response = secured(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
            let headers = response.headers_mut();
            headers.insert(header::LOCATION, HeaderValue::from_static("/"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                headers.insert(header::SET_COOKIE, value);
            }
            tracing::info!("dashboard login");
            response
        }
        Ok(None) => page(
            StatusCode::UNAUTHORIZED,
            "Koru dashboard: this login link is not valid",
            "The link was already used, has expired (links last 60 seconds) or is unknown. Run `koru dashboard` again for a new one.",
        ),
        Err(error) => page(StatusCode::INTERNAL_SERVER_ERROR, "Koru dashboard", &error.body.message),
    }
}

/// Anything else outside `/api` and `/mcp`.
pub async fn not_found() -> Response {
    page(StatusCode::NOT_FOUND, "Not found", "There is no such page.")
}
