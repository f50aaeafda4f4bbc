//! Secrets-looking values in the agent's tool arguments (step summaries and command lines) replaced by `[redacted]` before a turn leaves the daemon: API keys and tokens by their well-known shapes, and the value of any `key=`/`key:` whose name says it is a secret. Replies and prompts are left as the store has them (they are the conversation itself).

use std::sync::OnceLock;

use regex::Regex;

use super::model::Turn;

/// What stands in for a value taken out.
pub const REDACTED: &str = "[redacted]";

fn patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let shapes = [
            // `NAME="value"`, `"name": "value"`, `name='value'` where the name says secret.
            (
                r#"(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|credential|private[_-]?key)[a-z0-9_-]*"?\s*[=:]\s*")[^"]+""#,
                "${1}[redacted]\"",
            ),
            (
                r#"(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|credential|private[_-]?key)[a-z0-9_-]*'?\s*[=:]\s*')[^']+'"#,
                "${1}[redacted]'",
            ),
            // `NAME=value`, `name: value`.
            (
                r#"(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|credential|private[_-]?key)[a-z0-9_-]*\s*[=:]\s*)[^\s"'&]{4,}"#,
                "${1}[redacted]",
            ),
            // `--password value`, `--token value`, `-p value` is too common to tell.
            (
                r"(?i)(--(?:api-?key|access-?key|secret|token|passw(?:or)?d|auth-token)\s+)[^\s-]\S{3,}",
                "${1}[redacted]",
            ),
            // `Authorization: Bearer …`
            (r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", "${1}[redacted]"),
            // Well-known token shapes: OpenAI/Anthropic, GitHub, Slack, AWS, Google.
            (r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}", "[redacted]"),
            (r"\bgh[pousr]_[A-Za-z0-9]{30,}", "[redacted]"),
            (r"\bgithub_pat_[A-Za-z0-9_]{30,}", "[redacted]"),
            (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "[redacted]"),
            (r"\bAKIA[0-9A-Z]{16}\b", "[redacted]"),
            (r"\bAIza[0-9A-Za-z_-]{35}\b", "[redacted]"),
            // A URL's password: scheme://user:password@host
            (r"(://[^/\s:@]+:)[^/\s@]+@", "${1}[redacted]@"),
        ];
        shapes
            .into_iter()
            .map(|(pattern, with)| {
                (
                    Regex::new(pattern).expect("the redaction patterns are valid"),
                    with,
                )
            })
            .collect()
    })
}

/// `text` with secrets-looking values replaced.
pub fn redact_text(text: &str) -> String {
    let mut out = std::borrow::Cow::Borrowed(text);
    for (pattern, with) in patterns() {
        if pattern.is_match(&out) {
            out = std::borrow::Cow::Owned(pattern.replace_all(&out, *with).into_owned());
        }
    }
    out.into_owned()
}

/// Redacts every step's summary and command line of `turn`.
pub fn redact_turn(turn: &mut Turn) {
    for step in &mut turn.steps {
        step.summary = redact_text(&step.summary);
        if let Some(command) = &mut step.command {
            *command = redact_text(command);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_arguments_are_taken_out_and_the_rest_is_kept() {
        for (input, expected) in [
            (
                "export OPENAI_API_KEY=sk-abc123def456ghi789jkl",
                "export OPENAI_API_KEY=[redacted]",
            ),
            (
                "curl -H 'Authorization: Bearer abcdefgh12345678' https://x",
                "curl -H 'Authorization: Bearer [redacted]' https://x",
            ),
            (
                "gh auth login --with-token ghp_0123456789abcdefghij0123456789abcdef",
                "gh auth login --with-token [redacted]",
            ),
            (
                "psql postgres://app:hunter22@db/prod",
                "psql postgres://app:[redacted]@db/prod",
            ),
            (
                r#"{"password": "correct horse"}"#,
                r#"{"password": "[redacted]"}"#,
            ),
            (
                "login --password hunter22 now",
                "login --password [redacted] now",
            ),
            ("TOKEN='a b c d' ./run", "TOKEN='[redacted]' ./run"),
            (
                "mysql --password=s3cr3tpw -u root",
                "mysql --password=[redacted] -u root",
            ),
            (
                "cargo test --package koru-daemon",
                "cargo test --package koru-daemon",
            ),
            ("rg token_count src/", "rg token_count src/"),
            ("edit src/auth.rs", "edit src/auth.rs"),
        ] {
            assert_eq!(redact_text(input), expected, "{input}");
        }
    }
}
