//! Plain-text tables for listings: left-aligned columns sized to their content.

/// Renders rows under a header with two spaces between columns.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (index, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(index) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (index, cell) in cells.iter().enumerate() {
            if index + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let pad = widths[index] - cell.chars().count();
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// "3s", "4m", "2h", "5d": how long ago `then_ms` was.
pub fn age(now_ms: u64, then_ms: u64) -> String {
    let seconds = now_ms.saturating_sub(then_ms) / 1000;
    match seconds {
        0..=59 => format!("{seconds}s"),
        60..=3599 => format!("{}m", seconds / 60),
        3600..=86_399 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let table = render(
            &["SESSION", "PRODUCT", "WORKSPACE"],
            &[
                vec!["s_1".into(), "code-server".into(), "/w/é".into()],
                vec!["s_22".into(), "vscode".into(), "".into()],
            ],
        );
        expect![[r#"
            SESSION  PRODUCT      WORKSPACE
            s_1      code-server  /w/é
            s_22     vscode
        "#]]
        .assert_eq(&table);
        assert_eq!(age(10_000, 4_000), "6s");
        assert_eq!(age(7_200_000, 0), "2h");
    }
}
