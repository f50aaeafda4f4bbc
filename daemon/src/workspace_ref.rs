//! What a workspace named by a user or a controller means — a local path, a folder URI (`file:///…`, `vscode-remote://ssh-remote+box/…`) or the short form `ssh-remote+box:/path` — and how well it matches the folders a plugin's window has open.

use percent_encoding::percent_decode_str;

/// A workspace as a drive target names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceRef {
    /// A folder on this machine (a path, or a `file:` URI).
    Local { path: String },
    /// A folder on the machine a remote window is connected to: VS Code's remote
    /// authority (`ssh-remote+box`, `wsl+Ubuntu`, `dev-container+…`, `codespaces+…`) and
    /// the path there.
    Remote { authority: String, path: String },
}

/// Why a workspace could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceRefError {
    #[error("`{0}` is not an absolute path, a folder URI (file:///…, vscode-remote://AUTHORITY/…) or AUTHORITY:/path")]
    Unrecognized(String),
    #[error("`{0}` is a URI of a kind no IDE window opens folders as (scheme `{1}`)")]
    UnsupportedScheme(String, String),
}

impl WorkspaceRef {
    /// Reads a workspace as a target names it.
    pub fn parse(raw: &str) -> Result<WorkspaceRef, WorkspaceRefError> {
        let raw = raw.trim();
        if raw.starts_with('/') {
            return Ok(WorkspaceRef::Local {
                path: normalize(raw),
            });
        }
        if let Some((scheme, rest)) = raw.split_once("://") {
            return match scheme.to_ascii_lowercase().as_str() {
                "file" => {
                    let path = rest.find('/').map(|slash| &rest[slash..]).unwrap_or("/");
                    Ok(WorkspaceRef::Local {
                        path: normalize(&decode(strip_query(path))),
                    })
                }
                "vscode-remote" => {
                    let (authority, path) = match rest.find('/') {
                        Some(slash) => (&rest[..slash], &rest[slash..]),
                        None => (rest, "/"),
                    };
                    if authority.is_empty() {
                        return Err(WorkspaceRefError::Unrecognized(raw.into()));
                    }
                    Ok(WorkspaceRef::Remote {
                        authority: decode(authority),
                        path: normalize(&decode(strip_query(path))),
                    })
                }
                other => Err(WorkspaceRefError::UnsupportedScheme(
                    raw.into(),
                    other.into(),
                )),
            };
        }
        // The short form for remote windows: `ssh-remote+box:/home/me/repo`.
        if let Some((authority, path)) = raw.split_once(":/") {
            if authority.contains('+') && !authority.contains('/') {
                return Ok(WorkspaceRef::Remote {
                    authority: authority.to_string(),
                    path: normalize(&format!("/{path}")),
                });
            }
        }
        Err(WorkspaceRefError::Unrecognized(raw.into()))
    }

    /// How specifically `folder` (one of a window's folders) contains this workspace: the
    /// folder path's length when it is this workspace or one of its ancestors, else `None`.
    pub fn matched_by(&self, folder: &WorkspaceRef) -> Option<usize> {
        let (wanted, have) = match (self, folder) {
            (WorkspaceRef::Local { path: wanted }, WorkspaceRef::Local { path: have }) => {
                (wanted, have)
            }
            (
                WorkspaceRef::Remote {
                    authority: a,
                    path: wanted,
                },
                WorkspaceRef::Remote {
                    authority: b,
                    path: have,
                },
            ) if a.eq_ignore_ascii_case(b) => (wanted, have),
            _ => return None,
        };
        let inside = wanted == have
            || (wanted.starts_with(have.as_str())
                && (have.ends_with('/') || wanted.as_bytes().get(have.len()) == Some(&b'/')));
        inside.then_some(have.len())
    }
}

impl std::fmt::Display for WorkspaceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkspaceRef::Local { path } => f.write_str(path),
            WorkspaceRef::Remote { authority, path } => write!(f, "{authority}:{path}"),
        }
    }
}

fn strip_query(path: &str) -> &str {
    path.split(['?', '#']).next().unwrap_or("")
}

fn decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// A path without its trailing slashes (the root stays `/`).
pub fn normalize(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(authority: &str, path: &str) -> WorkspaceRef {
        WorkspaceRef::Remote {
            authority: authority.into(),
            path: path.into(),
        }
    }

    fn local(path: &str) -> WorkspaceRef {
        WorkspaceRef::Local { path: path.into() }
    }

    #[test]
    fn every_form_a_user_may_write_is_understood() {
        let cases = [
            ("/home/me/repo/", local("/home/me/repo")),
            ("file:///home/me/my%20repo", local("/home/me/my repo")),
            ("file://localhost/srv/x", local("/srv/x")),
            (
                "vscode-remote://ssh-remote+box/home/me/repo",
                remote("ssh-remote+box", "/home/me/repo"),
            ),
            (
                "vscode-remote://ssh-remote%2Bbox/home/me/r%C3%A9po",
                remote("ssh-remote+box", "/home/me/répo"),
            ),
            (
                "vscode-remote://wsl+Ubuntu/home/me",
                remote("wsl+Ubuntu", "/home/me"),
            ),
            (
                "ssh-remote+box:/home/me/repo",
                remote("ssh-remote+box", "/home/me/repo"),
            ),
            (
                "dev-container+7b22:/workspaces/app/",
                remote("dev-container+7b22", "/workspaces/app"),
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(WorkspaceRef::parse(raw), Ok(want), "{raw}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_what_is_accepted() {
        for raw in [
            "repo",
            "box:/home",
            "https://example.com/x",
            "vscode-remote:///x",
        ] {
            let error = WorkspaceRef::parse(raw).unwrap_err().to_string();
            assert!(error.contains(raw), "{error}");
        }
    }

    #[test]
    fn a_folder_matches_itself_and_what_is_inside_it_on_the_same_machine_only() {
        let folder = remote("ssh-remote+box", "/home/me/repo");
        assert_eq!(
            remote("ssh-remote+box", "/home/me/repo/src").matched_by(&folder),
            Some(13)
        );
        assert_eq!(
            remote("SSH-REMOTE+BOX", "/home/me/repo").matched_by(&folder),
            Some(13)
        );
        assert_eq!(
            remote("ssh-remote+other", "/home/me/repo").matched_by(&folder),
            None
        );
        assert_eq!(
            remote("ssh-remote+box", "/home/me/repo2").matched_by(&folder),
            None
        );
        assert_eq!(local("/home/me/repo").matched_by(&folder), None);
        assert_eq!(
            local("/home/me/repo/a").matched_by(&local("/home/me/repo")),
            Some(13)
        );
        assert_eq!(local("/x").matched_by(&local("/")), Some(1));
    }
}
