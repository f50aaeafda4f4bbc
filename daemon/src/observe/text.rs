//! Text helpers every chat-store parser shares: RFC 3339 timestamps as Unix milliseconds, and the one `file:` URI → local path decoder (VS Code's `workspace.json`, Cursor's bubbles' `workspaceUris`), strict, so a malformed URI never becomes a wrong path.

/// An RFC 3339 timestamp as Unix milliseconds (`None` for anything else, or before 1970).
pub fn parse_ts(text: &str) -> Option<u64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
}

/// The local path of a `file:` URI, or `None` for another scheme or a malformed one.
///
/// - `%HH` escapes are decoded; a malformed escape (`%zz`, a cut `%2`) or bytes that are
///   not UTF-8 make the URI unusable (`None`): a path is right or absent, never guessed.
/// - A raw `?` or `#` starts a query or fragment (VS Code percent-encodes them in paths).
/// - A Windows drive path loses its leading slash (`file:///c%3A/x` → `c:/x`).
/// - A host other than `localhost` makes a UNC path (`file://server/share` → `//server/share`).
pub fn local_path(uri: &str) -> Option<String> {
    let scheme_end = uri.find(':')?;
    if !uri[..scheme_end].eq_ignore_ascii_case("file") {
        return None;
    }
    let rest = &uri[scheme_end + 1..];
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (host, path) = match rest.strip_prefix("//") {
        Some(authority_and_path) => match authority_and_path.find('/') {
            Some(slash) => (&authority_and_path[..slash], &authority_and_path[slash..]),
            None => (authority_and_path, "/"),
        },
        None => ("", rest),
    };
    let path = percent_decode(path)?;
    let host = percent_decode(host)?;
    if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
        return Some(format!("//{host}{path}"));
    }
    let bytes = path.as_bytes();
    let drive =
        bytes.len() >= 3 && bytes[0] == b'/' && bytes[1].is_ascii_alphabetic() && bytes[2] == b':';
    Some(if drive { path[1..].to_string() } else { path })
}

/// `%HH` escapes decoded; `None` for a malformed escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while position < bytes.len() {
        if bytes[position] == b'%' {
            let hex = bytes.get(position + 1..position + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            decoded.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            position += 3;
        } else {
            decoded.push(bytes[position]);
            position += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both stores' cases: VS Code's `workspace.json` folders and Cursor's `workspaceUris`.
    #[test]
    fn file_uris_become_local_paths_or_nothing() {
        let cases: &[(&str, Option<&str>)] = &[
            ("file:///home/u/proj", Some("/home/u/proj")),
            ("file:///home/u/my%20proj", Some("/home/u/my proj")),
            (
                "file:///home/u/my%20proj%23%E2%9C%93",
                Some("/home/u/my proj#✓"),
            ),
            ("file:///c%3A/Users/me/app", Some("c:/Users/me/app")),
            ("file:///C:/work", Some("C:/work")),
            ("file://server/share/x", Some("//server/share/x")),
            ("file://localhost/home/u", Some("/home/u")),
            ("FILE:///upper", Some("/upper")),
            ("FILE://localhost/tmp/%C3%A9", Some("/tmp/é")),
            ("/plain/path", None),
            ("file:/no/authority", Some("/no/authority")),
            ("file:///a?query#fragment", Some("/a")),
            ("file:///bad%zz", None),
            ("file:///bad%", None),
            ("file:///x%2", None),
            ("file:///not-utf8%FF", None),
            ("vscode-remote://ssh-remote%2Bbox/home/u", None),
            ("https://example.com/x", None),
            ("no scheme", None),
        ];
        for (uri, expected) in cases {
            assert_eq!(local_path(uri).as_deref(), *expected, "{uri}");
        }
    }
}
