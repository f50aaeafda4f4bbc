//! The role every route needs: one table naming each method and path the server answers, read by the guard; whatever the table does not name needs the drive role, so a route added without a line here is closed to observers (and a test fails until it is classified).

use axum::http::Method;

use crate::access::Role;

/// Every route of the server with the role it needs: observe for what only reads, drive for
/// what acts. Paths are as the router spells them (`{id}` stands for one segment); `*` as
/// the method means every method. The open routes (health, the dashboard's page, assets and
/// `/login`) are listed too, so that the table is the whole server; they need no token.
pub const ROUTE_ROLES: &[(&str, &str, Role)] = &[
    ("GET", "/api/v1/health", Role::Observe),
    ("GET", "/api/v1/status", Role::Observe),
    ("GET", "/api/v1/sessions", Role::Observe),
    ("GET", "/api/v1/drives", Role::Observe),
    ("POST", "/api/v1/drives", Role::Drive),
    ("GET", "/api/v1/drives/{id}", Role::Observe),
    ("POST", "/api/v1/drives/{id}/cancel", Role::Drive),
    ("GET", "/api/v1/journal/verify", Role::Observe),
    ("GET", "/api/v1/chats", Role::Observe),
    ("GET", "/api/v1/chats/{id}/turns", Role::Observe),
    // It writes the chat's ledger on the daemon's machine.
    ("POST", "/api/v1/chats/{id}/audit", Role::Drive),
    ("GET", "/api/v1/drives/{id}/turn", Role::Observe),
    ("GET", "/api/v1/doctor", Role::Observe),
    ("GET", "/api/v1/interfaces", Role::Observe),
    ("POST", "/api/v1/registry/reload", Role::Drive),
    ("GET", "/api/v1/recovery", Role::Observe),
    ("POST", "/api/v1/recovery", Role::Drive),
    // A login code opens a dashboard session that may act: only a drive token mints one.
    ("POST", "/api/v1/dashboard/codes", Role::Drive),
    ("GET", "/api/v1/events", Role::Observe),
    ("GET", "/api/v1/events/ws", Role::Observe),
    // MCP: any caller may speak it; which tools it lists and runs follows the role.
    ("*", "/mcp", Role::Observe),
    ("GET", "/", Role::Observe),
    ("GET", "/assets/{name}", Role::Observe),
    ("GET", "/login", Role::Observe),
];

/// The role `method path` needs: the table's, with HEAD as GET; drive for anything the
/// table does not name.
pub fn needed_role(method: &Method, path: &str) -> Role {
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    let mcp = path == "/mcp" || path.starts_with("/mcp/");
    ROUTE_ROLES
        .iter()
        .find(|(m, pattern, _)| {
            (*m == "*" || *m == method)
                && (matches_pattern(pattern, path) || (mcp && *pattern == "/mcp"))
        })
        .map(|(_, _, role)| *role)
        .unwrap_or(Role::Drive)
}

/// True when `path` is `pattern` with each `{…}` standing for one non-empty segment.
fn matches_pattern(pattern: &str, path: &str) -> bool {
    let mut want = pattern.split('/');
    let mut have = path.split('/');
    loop {
        match (want.next(), have.next()) {
            (None, None) => return true,
            (Some(w), Some(h)) if w.starts_with('{') && w.ends_with('}') => {
                if h.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(h)) if w == h => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation the API documents (docs/openapi.json comes from the same routes) is in
    /// the table, and the table names nothing the API does not have: a new route fails here
    /// until its role is chosen.
    #[test]
    fn every_api_route_is_classified_and_nothing_else_is() {
        let document = super::super::openapi::document();
        let mut served = Vec::new();
        for (path, item) in &document.paths.as_ref().unwrap().paths {
            let aide::openapi::ReferenceOr::Item(item) = item else {
                panic!("{path}: a reference")
            };
            for (method, operation) in [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("PATCH", &item.patch),
                ("DELETE", &item.delete),
            ] {
                if operation.is_some() {
                    served.push((method.to_string(), path.clone()));
                }
            }
        }
        let classified: Vec<(String, String)> = ROUTE_ROLES
            .iter()
            .filter(|(_, path, _)| path.starts_with("/api/"))
            .map(|(m, p, _)| (m.to_string(), p.to_string()))
            .collect();
        for route in &served {
            assert!(
                classified.contains(route),
                "{} {} has no role in ROUTE_ROLES",
                route.0,
                route.1
            );
        }
        for route in &classified {
            assert!(
                served.contains(route),
                "ROUTE_ROLES names {} {}, which the API does not serve",
                route.0,
                route.1
            );
        }
    }

    #[test]
    fn reading_needs_observe_acting_needs_drive_and_the_unknown_needs_drive() {
        let role = |method: Method, path: &str| needed_role(&method, path);
        assert_eq!(role(Method::GET, "/api/v1/sessions"), Role::Observe);
        assert_eq!(role(Method::HEAD, "/api/v1/sessions"), Role::Observe);
        assert_eq!(role(Method::GET, "/api/v1/drives/d_12"), Role::Observe);
        assert_eq!(role(Method::POST, "/api/v1/drives"), Role::Drive);
        assert_eq!(
            role(Method::POST, "/api/v1/drives/d_12/cancel"),
            Role::Drive
        );
        assert_eq!(role(Method::POST, "/api/v1/recovery"), Role::Drive);
        assert_eq!(role(Method::POST, "/api/v1/registry/reload"), Role::Drive);
        assert_eq!(role(Method::POST, "/api/v1/dashboard/codes"), Role::Drive);
        assert_eq!(role(Method::GET, "/api/v1/events/ws"), Role::Observe);
        assert_eq!(role(Method::POST, "/mcp"), Role::Observe);
        assert_eq!(role(Method::DELETE, "/mcp"), Role::Observe);
        assert_eq!(role(Method::GET, "/assets/app.js"), Role::Observe);
        assert_eq!(role(Method::DELETE, "/api/v1/drives/d_1"), Role::Drive);
        assert_eq!(role(Method::GET, "/api/v1/drives//cancel"), Role::Drive);
        assert_eq!(role(Method::PUT, "/api/v1/sessions"), Role::Drive);
        assert_eq!(role(Method::GET, "/api/v2/anything"), Role::Drive);
    }
}
