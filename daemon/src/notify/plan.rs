//! The notifier's decisions, pure: which drive news becomes a notification (the policy's `on`), what it says and which buttons it carries, one notification per drive that its next event replaces (coalescing), and the rate limit — a token bucket whose held-back news is summed up in one notification when there is room again. Time comes in as milliseconds, so tests drive it by hand.

use std::collections::{HashMap, VecDeque};

use koru_registry::{NotifyEvent, NotifyPolicy};

use crate::app::drive_news::DriveNews;
use crate::desktop::notifications::{Notification, Urgency};

/// A button on a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    /// The recovery action `retry_drive`.
    Retry,
    /// The recovery action `cancel_drive`.
    Cancel,
    /// Opens the dashboard in the browser (when the daemon serves HTTP).
    Dashboard,
}

impl Button {
    /// The action key the notification service sends back.
    pub fn key(self) -> &'static str {
        match self {
            Button::Retry => "retry",
            Button::Cancel => "cancel",
            Button::Dashboard => "dashboard",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Button::Retry => "Retry",
            Button::Cancel => "Cancel",
            Button::Dashboard => "Open dashboard",
        }
    }
}

/// A notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The drive it is about (`None`: the summary of held-back news).
    pub drive_id: Option<String>,
    pub notification: Notification,
    pub buttons: Vec<Button>,
}

/// How many drives' notifications are remembered (for replacing them and for their
/// buttons); older ones are forgotten.
const REMEMBERED: usize = 256;
/// How much held-back news is kept for the summary.
const HELD: usize = 100;
/// How many drives the summary names.
const SUMMARY_LINES: usize = 5;

/// The notifier's state.
#[derive(Debug)]
pub struct Planner {
    policy: NotifyPolicy,
    /// Whether the daemon serves the dashboard (the Open dashboard button).
    dashboard: bool,
    /// Whether the service shows buttons (`None`: not known yet; assumed).
    service_has_actions: Option<bool>,
    tokens: f64,
    refilled_at_ms: u64,
    /// The notification shown for each drive, oldest first.
    shown: VecDeque<(String, u32)>,
    /// What each shown notification is about and which buttons it has.
    buttons: HashMap<u32, (Option<String>, Vec<Button>)>,
    /// News the rate limit held back, newest per drive, oldest first.
    held: VecDeque<DriveNews>,
    /// The summary notification's id, to replace it.
    summary_id: u32,
}

impl Planner {
    pub fn new(policy: NotifyPolicy, dashboard: bool, now_ms: u64) -> Planner {
        let tokens = f64::from(policy.burst.max(1));
        Planner {
            policy,
            dashboard,
            service_has_actions: None,
            tokens,
            refilled_at_ms: now_ms,
            shown: VecDeque::new(),
            buttons: HashMap::new(),
            held: VecDeque::new(),
            summary_id: 0,
        }
    }

    pub fn set_policy(&mut self, policy: NotifyPolicy) {
        self.tokens = self.tokens.min(f64::from(policy.burst.max(1)));
        self.policy = policy;
    }

    /// What the service said about buttons (`GetCapabilities` lists `actions`).
    pub fn set_service_has_actions(&mut self, has_actions: bool) {
        self.service_has_actions = Some(has_actions);
    }

    /// Whether the policy asks for any notification at all.
    pub fn enabled(&self) -> bool {
        !self.policy.on.is_empty()
    }

    /// A drive's news: the notification to send now, or nothing (the policy does not ask
    /// for it, or the rate limit holds it back until [`Planner::on_tick`]).
    pub fn on_news(&mut self, news: &DriveNews, now_ms: u64) -> Option<Outgoing> {
        if !self.policy.on.contains(&news.event) {
            // A drive's earlier notification stays as it was; held news of it is stale.
            self.held.retain(|held| held.drive_id != news.drive_id);
            return None;
        }
        self.refill(now_ms);
        if self.tokens < 1.0 {
            self.hold(news.clone());
            return None;
        }
        self.tokens -= 1.0;
        self.held.retain(|held| held.drive_id != news.drive_id);
        Some(self.notification_for(news))
    }

    /// Time passed: the held-back news, when the rate limit has room again — the one
    /// drive's own notification, or one summary of them all.
    pub fn on_tick(&mut self, now_ms: u64) -> Option<Outgoing> {
        if self.held.is_empty() {
            return None;
        }
        self.refill(now_ms);
        if self.tokens < 1.0 {
            return None;
        }
        self.tokens -= 1.0;
        if self.held.len() == 1 {
            let news = self.held.pop_front()?;
            return Some(self.notification_for(&news));
        }
        let held: Vec<DriveNews> = self.held.drain(..).collect();
        let mut lines: Vec<String> = held
            .iter()
            .rev()
            .take(SUMMARY_LINES)
            .map(|news| {
                format!(
                    "{}: {}{}",
                    news.drive_id,
                    headline(news),
                    place(news)
                        .map(|place| format!(" ({place})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        if held.len() > SUMMARY_LINES {
            lines.push(format!(
                "and {} more (`koru drives` lists them)",
                held.len() - SUMMARY_LINES
            ));
        }
        let buttons = self.offered(if self.dashboard {
            vec![Button::Dashboard]
        } else {
            Vec::new()
        });
        Some(Outgoing {
            drive_id: None,
            notification: Notification {
                replaces_id: self.summary_id,
                summary: format!("{} drives need you", held.len()),
                body: escape(&lines.join("\n")),
                actions: actions_of(&buttons),
                urgency: Urgency::Normal,
            },
            buttons,
        })
    }

    /// The service showed `outgoing` as notification `id`.
    pub fn shown(&mut self, outgoing: &Outgoing, id: u32) {
        match &outgoing.drive_id {
            None => self.summary_id = id,
            Some(drive_id) => {
                self.shown.retain(|(drive, _)| drive != drive_id);
                self.shown.push_back((drive_id.clone(), id));
                while self.shown.len() > REMEMBERED {
                    if let Some((_, old)) = self.shown.pop_front() {
                        self.buttons.remove(&old);
                    }
                }
            }
        }
        self.buttons
            .insert(id, (outgoing.drive_id.clone(), outgoing.buttons.clone()));
    }

    /// The drive and button behind `ActionInvoked(id, key)`, if that notification offered it.
    pub fn action(&self, id: u32, key: &str) -> Option<(Option<String>, Button)> {
        let (drive, buttons) = self.buttons.get(&id)?;
        let button = buttons.iter().find(|b| b.key() == key)?;
        Some((drive.clone(), *button))
    }

    /// The notification went away: it is not replaced any more, and its buttons are gone.
    pub fn closed(&mut self, id: u32) {
        self.buttons.remove(&id);
        self.shown.retain(|(_, shown)| *shown != id);
        if self.summary_id == id {
            self.summary_id = 0;
        }
    }

    fn refill(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.refilled_at_ms);
        self.refilled_at_ms = now_ms;
        let per_ms = f64::from(self.policy.per_minute) / 60_000.0;
        self.tokens =
            (self.tokens + elapsed as f64 * per_ms).min(f64::from(self.policy.burst.max(1)));
    }

    fn hold(&mut self, news: DriveNews) {
        self.held.retain(|held| held.drive_id != news.drive_id);
        self.held.push_back(news);
        while self.held.len() > HELD {
            self.held.pop_front();
        }
    }

    /// The buttons the policy and the service allow, of those that apply.
    fn offered(&self, buttons: Vec<Button>) -> Vec<Button> {
        if !self.policy.actions || self.service_has_actions == Some(false) {
            return Vec::new();
        }
        buttons
    }

    fn notification_for(&self, news: &DriveNews) -> Outgoing {
        let mut buttons = Vec::new();
        if news.retryable {
            buttons.push(Button::Retry);
        }
        if news.cancellable {
            buttons.push(Button::Cancel);
        }
        if self.dashboard {
            buttons.push(Button::Dashboard);
        }
        let buttons = self.offered(buttons);
        let replaces_id = self
            .shown
            .iter()
            .find(|(drive, _)| *drive == news.drive_id)
            .map(|(_, id)| *id)
            .unwrap_or(0);
        let mut body = Vec::new();
        body.push(match place(news) {
            Some(place) => format!("drive {} in {place}", news.drive_id),
            None => format!("drive {}", news.drive_id),
        });
        if !news.detail.is_empty() {
            body.push(match &news.code {
                Some(code) => format!("{code}: {}", news.detail),
                None => news.detail.clone(),
            });
        }
        Outgoing {
            drive_id: Some(news.drive_id.clone()),
            notification: Notification {
                replaces_id,
                summary: headline(news),
                body: escape(&body.join("\n")),
                actions: actions_of(&buttons),
                urgency: match news.event {
                    NotifyEvent::Done => Urgency::Low,
                    NotifyEvent::NeedsInput => Urgency::Critical,
                    _ => Urgency::Normal,
                },
            },
            buttons,
        }
    }
}

/// The notification's title for a drive's event.
fn headline(news: &DriveNews) -> String {
    match news.event {
        NotifyEvent::NeedsInput => "The chat waits for you".into(),
        NotifyEvent::ChatRefused => "The chat refused the prompt".into(),
        NotifyEvent::ChatNotReady if news.cancellable => {
            "The chat is not ready; the prompt waits".into()
        }
        NotifyEvent::ChatNotReady => "The chat was not ready; the prompt was not sent".into(),
        NotifyEvent::ScreenLocked => "The screen is locked; the prompt was not typed".into(),
        NotifyEvent::FocusMismatch => "The IDE window did not have focus".into(),
        NotifyEvent::Failed => "The prompt was not delivered".into(),
        NotifyEvent::Done => "The prompt was delivered".into(),
    }
}

/// `code-server, /home/me/repo`: where the drive went, as far as known.
fn place(news: &DriveNews) -> Option<String> {
    match (&news.product, &news.workspace) {
        (Some(product), Some(workspace)) => Some(format!("{product}, {workspace}")),
        (Some(product), None) => Some(product.clone()),
        (None, Some(workspace)) => Some(workspace.clone()),
        (None, None) => None,
    }
}

fn actions_of(buttons: &[Button]) -> Vec<(String, String)> {
    buttons
        .iter()
        .map(|b| (b.key().to_string(), b.label().to_string()))
        .collect()
}

/// The body as the spec's markup subset reads it: `&`, `<` and `>` as entities (servers
/// without markup show the body as it is written, and none of ours needs markup).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn news(drive_id: &str, event: NotifyEvent) -> DriveNews {
        DriveNews {
            drive_id: drive_id.into(),
            event,
            code: Some("chat_refused".into()),
            detail: "no language model is available".into(),
            product: Some("code-server".into()),
            workspace: Some("/w/repo".into()),
            retryable: true,
            cancellable: false,
            seen: std::time::Instant::now(),
        }
    }

    /// The notification for `news`, as shown with `id`.
    fn sent(planner: &mut Planner, news: &DriveNews, now_ms: u64, id: u32) -> Outgoing {
        let outgoing = planner.on_news(news, now_ms).expect("a notification");
        planner.shown(&outgoing, id);
        outgoing
    }

    #[test]
    fn a_failed_drive_gets_one_notification_with_its_buttons_and_what_happened() {
        let mut planner = Planner::new(NotifyPolicy::default(), true, 0);
        let out = sent(&mut planner, &news("d_1", NotifyEvent::ChatRefused), 0, 7);
        assert_eq!(out.notification.summary, "The chat refused the prompt");
        assert_eq!(
            out.notification.body,
            "drive d_1 in code-server, /w/repo\nchat_refused: no language model is available"
        );
        assert_eq!(out.buttons, [Button::Retry, Button::Dashboard]);
        assert_eq!(out.notification.replaces_id, 0);
        assert_eq!(
            planner.action(7, "retry"),
            Some((Some("d_1".into()), Button::Retry))
        );
        assert_eq!(planner.action(7, "cancel"), None, "not offered");
        assert_eq!(planner.action(8, "retry"), None, "not ours");
    }

    #[test]
    fn a_drives_next_event_replaces_its_notification_and_events_not_asked_for_are_quiet() {
        let mut planner = Planner::new(NotifyPolicy::default(), false, 0);
        let mut waiting = news("d_1", NotifyEvent::ChatNotReady);
        waiting.cancellable = true;
        waiting.retryable = false;
        let first = sent(&mut planner, &waiting, 0, 3);
        assert_eq!(first.buttons, [Button::Cancel]);
        assert_eq!(
            first.notification.summary,
            "The chat is not ready; the prompt waits"
        );
        let failed = planner
            .on_news(&news("d_1", NotifyEvent::Failed), 10)
            .unwrap();
        assert_eq!(failed.notification.replaces_id, 3);
        assert_eq!(
            planner.on_news(&news("d_2", NotifyEvent::Done), 20),
            None,
            "`done` is not in the default policy"
        );
        planner.closed(3);
        let again = planner
            .on_news(&news("d_1", NotifyEvent::Failed), 30)
            .unwrap();
        assert_eq!(
            again.notification.replaces_id, 0,
            "a closed one is not replaced"
        );
    }

    #[test]
    fn the_rate_limit_holds_a_storm_back_and_sums_it_up_in_one_notification() {
        let mut planner = Planner::new(NotifyPolicy::default(), true, 0);
        let mut sent_now = 0;
        for n in 0..10 {
            if planner
                .on_news(&news(&format!("d_{n}"), NotifyEvent::Failed), 100)
                .is_some()
            {
                sent_now += 1;
            }
        }
        assert_eq!(sent_now, 3, "a burst of three");
        // Six a minute: the next token after ten seconds.
        assert_eq!(planner.on_tick(5_000), None);
        let summary = planner.on_tick(10_200).expect("a summary");
        assert_eq!(summary.drive_id, None);
        assert_eq!(summary.notification.summary, "7 drives need you");
        expect_test::expect![[r#"
            d_9: The prompt was not delivered (code-server, /w/repo)
            d_8: The prompt was not delivered (code-server, /w/repo)
            d_7: The prompt was not delivered (code-server, /w/repo)
            d_6: The prompt was not delivered (code-server, /w/repo)
            d_5: The prompt was not delivered (code-server, /w/repo)
            and 2 more (`koru drives` lists them)"#]]
        .assert_eq(&summary.notification.body);
        assert_eq!(summary.buttons, [Button::Dashboard]);
        assert_eq!(planner.on_tick(60_000), None, "nothing is held any more");
    }

    #[test]
    fn one_held_drive_gets_its_own_notification_and_its_later_news_replaces_what_was_held() {
        let policy = NotifyPolicy {
            burst: 1,
            per_minute: 60,
            ..NotifyPolicy::default()
        };
        let mut planner = Planner::new(policy, false, 0);
        assert!(planner
            .on_news(&news("d_1", NotifyEvent::Failed), 0)
            .is_some());
        assert_eq!(
            planner.on_news(&news("d_2", NotifyEvent::ChatRefused), 10),
            None
        );
        assert_eq!(planner.on_news(&news("d_2", NotifyEvent::Failed), 20), None);
        let own = planner.on_tick(1_100).expect("room after a second");
        assert_eq!(own.drive_id.as_deref(), Some("d_2"));
        assert_eq!(own.notification.summary, "The prompt was not delivered");
    }

    #[test]
    fn no_buttons_when_the_policy_or_the_service_says_so_and_markup_is_escaped() {
        let mut planner = Planner::new(
            NotifyPolicy {
                actions: false,
                ..NotifyPolicy::default()
            },
            true,
            0,
        );
        let mut odd = news("d_1", NotifyEvent::Failed);
        odd.detail = "a <b>bold</b> & odd detail".into();
        let out = planner.on_news(&odd, 0).unwrap();
        assert!(out.buttons.is_empty() && out.notification.actions.is_empty());
        assert!(out
            .notification
            .body
            .ends_with("a &lt;b&gt;bold&lt;/b&gt; &amp; odd detail"));
        let mut planner = Planner::new(NotifyPolicy::default(), true, 0);
        planner.set_service_has_actions(false);
        assert!(planner
            .on_news(&news("d_1", NotifyEvent::Failed), 0)
            .unwrap()
            .buttons
            .is_empty());
    }

    #[test]
    fn an_empty_on_list_turns_notifications_off() {
        let mut planner = Planner::new(
            NotifyPolicy {
                on: Vec::new(),
                ..NotifyPolicy::default()
            },
            true,
            0,
        );
        assert!(!planner.enabled());
        assert_eq!(planner.on_news(&news("d_1", NotifyEvent::Failed), 0), None);
        assert_eq!(planner.on_tick(100_000), None);
    }
}
