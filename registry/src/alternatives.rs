//! Brace alternatives in registry `locations`: `a/{b,c}/d` stands for `a/b/d` and `a/c/d`, so one line can name a store's folder in every product of a family; expanded when a layer is read, so every consumer sees one plain path per entry.

/// Expands every bare `{x,y,…}` group of `location` into one location per alternative
/// (several groups multiply). `${…}` variable references are copied untouched, and a
/// group without a top-level comma is literal text, as in a shell. An unbalanced brace
/// is an error naming its byte offset.
pub fn expand_alternatives(location: &str) -> Result<Vec<String>, String> {
    let bytes = location.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'$' if bytes.get(index + 1) == Some(&b'{') => {
                index = matching_brace(location, index + 1)? + 1;
            }
            b'{' => {
                let close = matching_brace(location, index)?;
                let inner = &location[index + 1..close];
                let choices = top_level_split(inner);
                if choices.len() < 2 {
                    index = close + 1;
                    continue;
                }
                let (head, tail) = (&location[..index], &location[close + 1..]);
                let mut out = Vec::new();
                for choice in choices {
                    out.extend(expand_alternatives(&format!("{head}{choice}{tail}"))?);
                }
                return Ok(out);
            }
            b'}' => return Err(format!("unmatched `}}` at byte {index} of {location:?}")),
            _ => index += 1,
        }
    }
    Ok(vec![location.to_string()])
}

/// The offset of the `}` closing the `{` at `open`.
fn matching_brace(location: &str, open: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    for (offset, byte) in location.bytes().enumerate().skip(open) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(offset);
                }
            }
            _ => {}
        }
    }
    Err(format!("unclosed `{{` at byte {open} of {location:?}"))
}

/// `inner` split at the commas outside nested braces.
fn top_level_split(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (offset, byte) in inner.bytes().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&inner[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::expand_alternatives;

    fn expand(location: &str) -> Vec<String> {
        expand_alternatives(location).unwrap()
    }

    #[test]
    fn a_plain_location_is_itself() {
        assert_eq!(expand("~/.claude/projects"), ["~/.claude/projects"]);
    }

    #[test]
    fn one_group_gives_one_location_per_choice_in_order() {
        assert_eq!(
            expand("~/.config/{Code,Code - Insiders,VSCodium}/User"),
            [
                "~/.config/Code/User",
                "~/.config/Code - Insiders/User",
                "~/.config/VSCodium/User"
            ]
        );
    }

    #[test]
    fn two_groups_multiply() {
        assert_eq!(
            expand("/{a,b}/x/{1,2}"),
            ["/a/x/1", "/a/x/2", "/b/x/1", "/b/x/2"]
        );
    }

    #[test]
    fn a_nested_group_expands_inside_its_choice() {
        assert_eq!(expand("/{a/{1,2},b}"), ["/a/1", "/a/2", "/b"]);
    }

    #[test]
    fn variable_references_are_left_for_path_expansion() {
        assert_eq!(
            expand("${XDG_CONFIG_HOME:-~/.config}/{Code,Cursor}/User"),
            [
                "${XDG_CONFIG_HOME:-~/.config}/Code/User",
                "${XDG_CONFIG_HOME:-~/.config}/Cursor/User"
            ]
        );
        assert_eq!(
            expand("${A:-${B:-x,y}}/z"),
            ["${A:-${B:-x,y}}/z"],
            "a comma inside a variable's default is not an alternative"
        );
    }

    #[test]
    fn a_group_without_a_comma_is_literal() {
        assert_eq!(expand("/a/{b}/c"), ["/a/{b}/c"]);
        assert_eq!(expand("/a/{}/c"), ["/a/{}/c"]);
    }

    #[test]
    fn an_empty_choice_is_kept() {
        assert_eq!(expand("/a{,-insiders}"), ["/a", "/a-insiders"]);
    }

    #[test]
    fn unbalanced_braces_are_errors_that_say_where() {
        let open = expand_alternatives("/a/{b,c").unwrap_err();
        assert!(open.contains("unclosed `{` at byte 3"), "{open}");
        let close = expand_alternatives("/a/b}").unwrap_err();
        assert!(close.contains("unmatched `}` at byte 4"), "{close}");
        let variable = expand_alternatives("${HOME/x").unwrap_err();
        assert!(variable.contains("unclosed `{` at byte 1"), "{variable}");
    }
}
