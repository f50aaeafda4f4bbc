//! Figures of the desktop bus (`cargo bench -p koru-daemon --bench desktop_bus`; needs dbus-daemon): keysym throughput through the stand-in portal (the daemon's portal client typing text key by key, press and release per character), and the added latency of a desktop notification — from the moment a plugin's failing ack leaves for the real daemon to the moment a stand-in notification service receives `Notify` — as p50/p99 over many drives.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koru_daemon::desktop::portal::{Portal, TokenStore};
use koru_daemon::desktop::Buses;
use koru_system_tests::{greet, plugin_hello, Sandbox, SessionBus};
use serde_json::json;
use support::portal::StandInPortal;
use zbus::zvariant::OwnedValue;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        keysym_throughput().await;
        notification_latency().await;
    });
}

/// Types `CHARS` characters through one portal session, key by key, three times.
async fn keysym_throughput() {
    const CHARS: usize = 2_000;
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let stand_in = StandInPortal::serve(&bus.address).await;
    // The portal client finds the session bus where the daemon would: in the environment.
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &bus.address);
    let buses = Arc::new(Buses::new(Duration::from_secs(2)));
    let portal = Portal::new(
        buses,
        TokenStore {
            path: sandbox.path().join("state/koru/portal-restore-token"),
        },
    );
    let session = portal
        .session(Duration::from_secs(5))
        .await
        .expect("a portal session with the stand-in");
    let text: String = "the quick brown fox jumps over the lazy dog. "
        .chars()
        .cycle()
        .take(CHARS)
        .collect();
    let mut rates = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        for c in text.chars() {
            let keysym = koru_injectors::keysym::for_char(c);
            session.keysym(keysym, true).await.expect("a key press");
            session.keysym(keysym, false).await.expect("a key release");
        }
        rates.push(CHARS as f64 / started.elapsed().as_secs_f64());
    }
    let typed = stand_in.typed();
    assert_eq!(typed.len(), 3 * CHARS, "every character arrived");
    rates.sort_by(f64::total_cmp);
    println!(
        "keysym throughput through the stand-in portal: {:.0} chars/s median ({:.0}–{:.0}), {CHARS} chars a run, press + release each",
        rates[1], rates[0], rates[2]
    );
}

/// The stand-in notification service: the moment each `Notify` arrived.
struct Recorder {
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Recorder {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        _app_name: String,
        replaces_id: u32,
        _app_icon: String,
        _summary: String,
        _body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let mut arrivals = self.arrivals.lock().unwrap();
        arrivals.push(Instant::now());
        if replaces_id != 0 {
            replaces_id
        } else {
            arrivals.len() as u32
        }
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into()]
    }
}

/// `DRIVES` drives refused by the chat, one after the other: from the plugin's `failed`
/// ack to the stand-in's `Notify`.
async fn notification_latency() {
    const DRIVES: usize = 300;
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let _service = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.Notifications")
        .unwrap()
        .serve_at(
            "/org/freedesktop/Notifications",
            Recorder {
                arrivals: arrivals.clone(),
            },
        )
        .unwrap()
        .build()
        .await
        .unwrap();
    // No rate limit in the way of the measurement.
    std::fs::create_dir_all(sandbox.xdg_config_home().join("koru")).unwrap();
    std::fs::write(
        sandbox.xdg_config_home().join("koru/registry.yaml"),
        "policy:\n  notify: {burst: 100000, per_minute: 100000}\n",
    )
    .unwrap();
    let _daemon = sandbox.start_daemon_with_env(
        &["--no-observe", "--no-journal"],
        &[("DBUS_SESSION_BUS_ADDRESS", &bus.address)],
    );
    let workspace = sandbox.workspace("latency");
    let socket = sandbox.socket();
    let latencies = tokio::task::spawn_blocking(move || {
        let (mut plugin, _) = greet(&socket, &plugin_hello("code-server", &workspace));
        let (mut controller, _) = greet(&socket, &koru_system_tests::controller_hello());
        let mut latencies = Vec::new();
        for n in 0..DRIVES {
            controller.send(&json!({"v": 1, "id": n + 1, "type": "drive.create",
                "target": {"workspace": workspace}, "prompt": format!("p{n}")}));
            controller.recv_type("drive.result");
            let drive = plugin.recv_type("drive");
            let before = arrivals.lock().unwrap().len();
            let sent = Instant::now();
            plugin.send(
                &json!({"v": 1, "type": "ack", "drive_id": drive["drive_id"], "stage": "failed",
                "blocker": {"code": "chat_refused", "detail": "out of quota"}}),
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if let Some(at) = arrivals.lock().unwrap().get(before) {
                    latencies.push(at.duration_since(sent));
                    break;
                }
                assert!(Instant::now() < deadline, "no notification for drive {n}");
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        latencies
    })
    .await
    .unwrap();
    let mut sorted = latencies.clone();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "notification latency (plugin's failing ack → Notify at the service), {DRIVES} drives: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        sorted[sorted.len() - 1].as_secs_f64() * 1e6
    );
}
