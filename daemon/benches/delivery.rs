//! Time to deliver a 4 KB prompt by each path, end to end through the real daemon and CLI: OS-injection paste into a real xterm under Xvfb (Unicode), OS-injection typing (ASCII: typing non-ASCII is refused as racy), and the native route acked by the fake plugin (`cargo bench -p koru-daemon --bench delivery`; needs Xvfb, xterm, xdotool, xclip).

use std::process::Stdio;
use std::time::{Duration, Instant};

use koru_system_tests::{Sandbox, XTerm, Xvfb};

const RUNS: usize = 10;

fn prompt_4k_unicode() -> String {
    let phrase = "Réécris la fonction parse() — garde les tests ✓ 日本語 🚀\n";
    let mut prompt = String::new();
    for c in phrase.chars().cycle() {
        if prompt.len() + c.len_utf8() > 4096 {
            break;
        }
        prompt.push(c);
    }
    prompt
}

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let p50 = samples[samples.len() / 2];
    (samples[0], p50, samples[samples.len() - 1])
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon_with_env(&[], &[("DISPLAY", &xvfb.display)]);
    let xterm = XTerm::start(&xvfb.display, sandbox.path(), "bench");

    let unicode = prompt_4k_unicode();
    let ascii: String = "cargo test --workspace and fix what fails; "
        .chars()
        .cycle()
        .take(4096)
        .collect();
    let mut rows = Vec::new();

    // OS injection, paste path (the default for non-ASCII or long text).
    let mut paste = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let output = sandbox
            .koru()
            .args([
                "send",
                "--window-pid",
                &xterm.pid.to_string(),
                "--wait",
                &unicode,
            ])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        paste.push(started.elapsed());
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    rows.push((
        "OS injection, paste (xdotool + xclip), 4 KB Unicode",
        stats(paste),
        Some(Duration::from_millis(300)),
    ));

    // OS injection, typing (ASCII only), through the library with the default 12 ms delay.
    std::env::set_var("DISPLAY", &xvfb.display);
    let injector = koru_injectors::Injector {
        name: "xdotool",
        windows: Box::new(koru_injectors::XdotoolWindows::default()),
        keys: Box::new(koru_injectors::XdotoolKeys::default()),
        clipboard: None,
    };
    let window = injector
        .windows
        .find(&koru_injectors::TargetSpec::for_pid(xterm.pid))
        .unwrap()
        .remove(0);
    let options = koru_injectors::DeliverOptions {
        method: koru_injectors::Method::Type,
        ..koru_injectors::DeliverOptions::default()
    };
    let mut typed = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        koru_injectors::deliver(&injector, &window, &ascii, &options).unwrap();
        typed.push(started.elapsed());
    }
    rows.push((
        "OS injection, typing (xdotool, 12 ms/key), 4 KB ASCII",
        stats(typed),
        None,
    ));

    // Native route acked by the fake plugin.
    let workspace = sandbox.workspace("bench");
    let _plugin = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let mut native = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let status = sandbox
            .koru()
            .args([
                "send",
                "--workspace",
                workspace.to_str().unwrap(),
                "--wait",
                &unicode,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        native.push(started.elapsed());
        assert!(status.success());
    }
    rows.push((
        "native send acked by the fake plugin, 4 KB Unicode",
        stats(native),
        None,
    ));

    println!("| path | runs | min | p50 | max | target |");
    println!("|---|---|---|---|---|---|");
    for (name, (min, p50, max), target) in rows {
        let runs = if name.contains("typing") { 3 } else { RUNS };
        let verdict = match target {
            Some(limit) => format!(
                "< {}: {}",
                ms(limit),
                if p50 < limit { "met (p50)" } else { "MISSED" }
            ),
            None => "—".into(),
        };
        println!(
            "| {name} | {runs} | {} | {} | {} | {verdict} |",
            ms(min),
            ms(p50),
            ms(max)
        );
    }
    println!("\n(each CLI measurement includes starting `koru send`, connecting, and waiting for the terminal state)");
}
