//! Criterion benchmark of the protocol codec: `encode_line` and `decode_line` of a daemon → plugin `drive` line with a ~200-character mixed ASCII/Unicode prompt and with a 4 KB prompt (`cargo bench -p koru-protocol --bench codec`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use koru_protocol::{
    decode_line, encode_line, AckStage, DriveOptions, DriveRequest, DriveStep, Envelope, Message,
    Route,
};

/// Text a person might send to a chat: ASCII code words, accents, CJK, an emoji, a quote
/// and a newline, so that both the UTF-8 check and JSON escaping have work to do.
const PROMPT_TEXT: &str = "Refactor `parse_header()` so errors carry line:column — \
     keep the tests green, «ne casse rien», 日本語のコメントも直して ✓ 🚀\n\"then\" run cargo test. ";

/// The first `chars` characters of the prompt text, repeated as needed.
fn prompt_of_chars(chars: usize) -> String {
    PROMPT_TEXT.chars().cycle().take(chars).collect()
}

/// The longest prefix of the repeated prompt text that fits in `bytes` bytes of UTF-8.
fn prompt_of_bytes(bytes: usize) -> String {
    let mut prompt = String::with_capacity(bytes);
    for character in PROMPT_TEXT.chars().cycle() {
        if prompt.len() + character.len_utf8() > bytes {
            break;
        }
        prompt.push(character);
    }
    prompt
}

/// A `drive` line as the daemon sends it to a VS Code plugin with the default registry:
/// the native-send route and its one step (`vscode_native_chat_open` in
/// `registry/default.yaml`).
fn drive_envelope(prompt: String) -> Envelope {
    Envelope::new(Message::Drive(DriveRequest {
        drive_id: "d_3f9a1c2e4b5d".to_string(),
        prompt,
        options: DriveOptions::default(),
        route: Route::NativeSend,
        steps: vec![DriveStep {
            command: "workbench.action.chat.open".to_string(),
            args: vec![serde_json::json!({"query": "$prompt", "isPartialQuery": false})],
            proves: AckStage::Submitted,
        }],
    }))
}

fn codec(c: &mut Criterion) {
    let cases = [
        ("200-char prompt", prompt_of_chars(200)),
        ("4 KB prompt", prompt_of_bytes(4096)),
    ];
    let mut group = c.benchmark_group("drive line");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (label, prompt) in cases {
        let envelope = drive_envelope(prompt);
        let line = encode_line(&envelope);
        // `decode_line` takes the line without its newline, as the framing codec hands it over.
        let body = &line[..line.len() - 1];
        assert_eq!(
            decode_line(body).as_ref(),
            Ok(&envelope),
            "the line must round-trip"
        );
        group.throughput(Throughput::Bytes(line.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("encode+decode", label),
            &envelope,
            |b, envelope| {
                b.iter(|| {
                    let line = encode_line(black_box(envelope));
                    decode_line(&line[..line.len() - 1])
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("encode", label),
            &envelope,
            |b, envelope| b.iter(|| encode_line(black_box(envelope))),
        );
        group.bench_with_input(BenchmarkId::new("decode", label), body, |b, body| {
            b.iter(|| decode_line(black_box(body)))
        });
    }
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
