//! Is the screen locked? Asked of three sources in order — logind's session `LockedHint` (org.freedesktop.login1, system bus), org.gnome.ScreenSaver, org.freedesktop.ScreenSaver (session bus) — and the first that answers wins. Used before every OS injection and by doctor, which shows the source that answered.

use std::sync::{Arc, Mutex};

use zbus::zvariant::OwnedObjectPath;

use super::bus::{Bus, BusError, Buses, Call};

/// Where the lock state can come from, in the order they are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockSource {
    /// logind's session object: `LockedHint`, set by the desktop's locker.
    Login1,
    /// GNOME Shell's screen shield.
    GnomeScreenSaver,
    /// The freedesktop screen saver interface (KDE Plasma, Xfce, and others).
    FreedesktopScreenSaver,
}

impl LockSource {
    /// Every source, in the order they are asked.
    pub const ALL: [LockSource; 3] = [
        LockSource::Login1,
        LockSource::GnomeScreenSaver,
        LockSource::FreedesktopScreenSaver,
    ];

    /// The source as doctor and logs name it.
    pub fn describe(self) -> &'static str {
        match self {
            LockSource::Login1 => "org.freedesktop.login1 (the session's LockedHint, system bus)",
            LockSource::GnomeScreenSaver => "org.gnome.ScreenSaver.GetActive (session bus)",
            LockSource::FreedesktopScreenSaver => {
                "org.freedesktop.ScreenSaver.GetActive (session bus)"
            }
        }
    }

    /// The bus name, short.
    pub fn bus_name(self) -> &'static str {
        match self {
            LockSource::Login1 => "org.freedesktop.login1",
            LockSource::GnomeScreenSaver => "org.gnome.ScreenSaver",
            LockSource::FreedesktopScreenSaver => "org.freedesktop.ScreenSaver",
        }
    }
}

/// What one check found: the first source that answered (if any) and why the ones
/// before it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockReport {
    /// The source that answered and whether it says the screen is locked.
    pub answer: Option<(LockSource, bool)>,
    /// The sources asked before the answer (all of them when none answered), each with
    /// why it did not answer.
    pub unanswered: Vec<(LockSource, String)>,
}

impl LockReport {
    /// `Some(why)` when the answering source says the screen is locked. No answer counts as
    /// not locked: focus verification still guards every key.
    pub fn locked(&self) -> Option<String> {
        match self.answer {
            Some((source, true)) => Some(format!(
                "the screen is locked (as {} says); keys cannot reach a locked session",
                source.describe()
            )),
            _ => None,
        }
    }

    /// One line for doctor and logs.
    pub fn describe(&self) -> String {
        let skipped = || {
            self.unanswered
                .iter()
                .map(|(source, why)| format!("{}: {why}", source.bus_name()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match self.answer {
            Some((source, locked)) => {
                let state = if locked { "locked" } else { "not locked" };
                let mut line = format!("{state}, as {} says", source.describe());
                if !self.unanswered.is_empty() {
                    line.push_str(&format!(" (not answered before it: {})", skipped()));
                }
                line
            }
            None => format!("no lock source answered: {}", skipped()),
        }
    }
}

/// Asks the lock sources; cheap to clone (the bus connections are shared).
#[derive(Debug, Clone)]
pub struct LockDetector {
    buses: Arc<Buses>,
    /// The source that answered last, to log when it changes.
    last_source: Arc<Mutex<Option<Option<LockSource>>>>,
}

impl LockDetector {
    pub fn new(buses: Arc<Buses>) -> LockDetector {
        LockDetector {
            buses,
            last_source: Arc::new(Mutex::new(None)),
        }
    }

    /// Asks the sources ([`ask`]) and logs when the source that answers changes.
    pub async fn check(&self) -> LockReport {
        let report = ask(&self.buses).await;
        self.log_source_change(&report);
        report
    }

    fn log_source_change(&self, report: &LockReport) {
        let source = report.answer.map(|(source, _)| source);
        let Ok(mut last) = self.last_source.lock() else {
            return;
        };
        if *last == Some(source) {
            return;
        }
        *last = Some(source);
        match source {
            Some(source) => {
                tracing::info!(source = source.describe(), "screen lock state comes from")
            }
            None => tracing::info!(
                report = %report.describe(),
                "no lock source answers; a locked screen is not detected (focus checks still guard every key)"
            ),
        }
    }
}

/// Asks every source at once and takes the answer of the first, in order, that gave one
/// (so a dead source costs one timeout, not one per source).
pub async fn ask(buses: &Buses) -> LockReport {
    let (login1, gnome, freedesktop) = tokio::join!(
        ask_login1(buses),
        ask_screen_saver(
            buses,
            LockSource::GnomeScreenSaver,
            "/org/gnome/ScreenSaver"
        ),
        ask_screen_saver(
            buses,
            LockSource::FreedesktopScreenSaver,
            "/org/freedesktop/ScreenSaver"
        ),
    );
    first_answer([
        (LockSource::Login1, login1),
        (LockSource::GnomeScreenSaver, gnome),
        (LockSource::FreedesktopScreenSaver, freedesktop),
    ])
}

/// The report for answers given in the order the sources are asked.
pub fn first_answer(answers: [(LockSource, Result<bool, BusError>); 3]) -> LockReport {
    let mut unanswered = Vec::new();
    for (source, answer) in answers {
        match answer {
            Ok(locked) => {
                return LockReport {
                    answer: Some((source, locked)),
                    unanswered,
                }
            }
            Err(error) => unanswered.push((source, error.short())),
        }
    }
    LockReport {
        answer: None,
        unanswered,
    }
}

const LOGIN1: &str = "org.freedesktop.login1";

/// logind: the session of this process (`GetSessionByPID`), else logind's `auto` session
/// (the caller's, or the user's display session for a process outside any session, such
/// as a systemd user service), and its `LockedHint`.
async fn ask_login1(buses: &Buses) -> Result<bool, BusError> {
    let by_pid: Result<OwnedObjectPath, BusError> = buses
        .call(
            Call {
                bus: Bus::System,
                destination: LOGIN1,
                path: "/org/freedesktop/login1",
                interface: "org.freedesktop.login1.Manager",
                method: "GetSessionByPID",
            },
            &(std::process::id(),),
        )
        .await;
    let path = match by_pid {
        Ok(path) => path.to_string(),
        // logind answered, but this process is in no session of its own.
        Err(error @ BusError::Refused { .. }) if !error.is_no_service() => {
            "/org/freedesktop/login1/session/auto".to_string()
        }
        Err(error) => return Err(error),
    };
    buses
        .property::<bool>(
            Bus::System,
            LOGIN1,
            &path,
            "org.freedesktop.login1.Session",
            "LockedHint",
        )
        .await
}

async fn ask_screen_saver(buses: &Buses, source: LockSource, path: &str) -> Result<bool, BusError> {
    buses
        .call(
            Call {
                bus: Bus::Session,
                destination: source.bus_name(),
                path,
                interface: source.bus_name(),
                method: "GetActive",
            },
            &(),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str) -> BusError {
        BusError::Refused {
            what: "test".into(),
            name: name.into(),
            detail: None,
        }
    }

    #[test]
    fn the_first_source_that_answers_wins_and_says_why_the_earlier_ones_did_not() {
        let report = first_answer([
            (
                LockSource::Login1,
                Err(BusError::Connect {
                    bus: "system",
                    detail: "No such file or directory".into(),
                }),
            ),
            (LockSource::GnomeScreenSaver, Ok(false)),
            (LockSource::FreedesktopScreenSaver, Ok(true)),
        ]);
        assert_eq!(report.answer, Some((LockSource::GnomeScreenSaver, false)));
        assert_eq!(report.locked(), None);
        assert_eq!(
            report.describe(),
            "not locked, as org.gnome.ScreenSaver.GetActive (session bus) says (not answered before it: org.freedesktop.login1: cannot connect to the system bus: No such file or directory)"
        );
    }

    #[test]
    fn a_locked_answer_names_its_source_and_no_answer_is_not_locked() {
        let locked = first_answer([
            (LockSource::Login1, Ok(true)),
            (LockSource::GnomeScreenSaver, Ok(false)),
            (LockSource::FreedesktopScreenSaver, Ok(false)),
        ]);
        assert!(locked
            .locked()
            .unwrap()
            .contains("org.freedesktop.login1 (the session's LockedHint, system bus)"));
        let none = first_answer([
            (
                LockSource::Login1,
                Err(refused("org.freedesktop.DBus.Error.ServiceUnknown")),
            ),
            (
                LockSource::GnomeScreenSaver,
                Err(refused("org.freedesktop.DBus.Error.ServiceUnknown")),
            ),
            (
                LockSource::FreedesktopScreenSaver,
                Err(refused("org.freedesktop.DBus.Error.ServiceUnknown")),
            ),
        ]);
        assert_eq!(none.locked(), None);
        assert_eq!(none.describe(), "no lock source answered: org.freedesktop.login1: ServiceUnknown; org.gnome.ScreenSaver: ServiceUnknown; org.freedesktop.ScreenSaver: ServiceUnknown");
    }
}
