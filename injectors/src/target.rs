//! Which windows a drive may target: the IDE's process family (the pid from the plugin's hello, its ancestors and descendants) and/or title and class patterns.

use std::collections::BTreeSet;

use regex::Regex;

/// What identifies the target window.
#[derive(Debug, Clone, Default)]
pub struct TargetSpec {
    /// The pids whose windows qualify first: the process and its descendants.
    pub pids: BTreeSet<u32>,
    /// Ancestors, nearest first: when no window belongs to `pids`, the nearest ancestor
    /// that owns one is the target (VS Code's window belongs to the parent of the
    /// extension host). Never more than one generation is taken.
    pub ancestors: Vec<u32>,
    pub title: Option<Regex>,
    pub class: Option<Regex>,
}

impl TargetSpec {
    /// A target by process: the pid, its descendants, then its nearest ancestor with a window.
    pub fn for_pid(pid: u32) -> TargetSpec {
        let (pids, ancestors) = process_tree(pid);
        TargetSpec {
            pids,
            ancestors,
            ..TargetSpec::default()
        }
    }

    /// The pid generations to search, in order: the process family, then each ancestor.
    pub fn generations(&self) -> Vec<BTreeSet<u32>> {
        let mut generations = vec![self.pids.clone()];
        generations.extend(self.ancestors.iter().map(|pid| BTreeSet::from([*pid])));
        generations
    }

    /// This target restricted to one generation of pids.
    pub fn with_pids(&self, pids: BTreeSet<u32>) -> TargetSpec {
        TargetSpec {
            pids,
            ancestors: Vec::new(),
            title: self.title.clone(),
            class: self.class.clone(),
        }
    }

    /// True when `window` qualifies: its pid is in the family (when pids are given) and
    /// its title and class match (when patterns are given).
    pub fn matches(&self, window: &crate::Window) -> bool {
        let pid_ok = self.pids.is_empty() || window.pid.is_some_and(|p| self.pids.contains(&p));
        let title_ok = self
            .title
            .as_ref()
            .is_none_or(|r| r.is_match(&window.title));
        let class_ok = self
            .class
            .as_ref()
            .is_none_or(|r| r.is_match(&window.class));
        pid_ok && title_ok && class_ok
    }

    /// Nothing to match on at all.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.ancestors.is_empty()
            && self.title.is_none()
            && self.class.is_none()
    }
}

impl std::fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.pids.is_empty() {
            parts.push(format!(
                "pids {}",
                self.pids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if let Some(title) = &self.title {
            parts.push(format!("title /{title}/"));
        }
        if let Some(class) = &self.class {
            parts.push(format!("class /{class}/"));
        }
        if parts.is_empty() {
            f.write_str("nothing")
        } else {
            f.write_str(&parts.join(" and "))
        }
    }
}

/// `pid` and all its descendants, plus its ancestors nearest first (up to, not including, init).
pub fn process_tree(pid: u32) -> (BTreeSet<u32>, Vec<u32>) {
    let parents = all_parents();
    let mut family = BTreeSet::from([pid]);
    let mut frontier = vec![pid];
    while let Some(next) = frontier.pop() {
        for (child, parent) in &parents {
            if *parent == next && family.insert(*child) {
                frontier.push(*child);
            }
        }
    }
    let mut ancestors = Vec::new();
    let mut current = pid;
    while let Some(parent) = parents.get(&current).copied() {
        if parent <= 1 || family.contains(&parent) || ancestors.contains(&parent) {
            break;
        }
        ancestors.push(parent);
        current = parent;
    }
    (family, ancestors)
}

/// `pid`, its ancestors and all its descendants.
pub fn process_family(pid: u32) -> BTreeSet<u32> {
    let (mut family, ancestors) = process_tree(pid);
    family.extend(ancestors);
    family
}

/// pid → parent pid for every process (Linux `/proc`).
fn all_parents() -> std::collections::HashMap<u32, u32> {
    all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect()
}

/// Every process id `/proc` lists (those of other users too; their files may not read).
pub fn all_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .collect()
}

/// The parent of `pid`, from `/proc/PID/stat` (`None`: gone, or not readable).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: parse after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_of_this_process_holds_its_parent_and_its_children() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let family = process_family(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(family.contains(&me));
        assert!(
            family.contains(&child.id()),
            "descendants are in the family"
        );
        let parent = std::os::unix::process::parent_id();
        if parent > 1 {
            assert!(family.contains(&parent), "ancestors are in the family");
        }
    }

    #[test]
    fn matching_needs_every_given_criterion() {
        let window = crate::Window {
            id: "1".into(),
            pid: Some(10),
            title: "repo — Visual Studio Code".into(),
            class: "Code".into(),
        };
        let mut spec = TargetSpec::default();
        spec.pids.insert(10);
        assert!(spec.matches(&window));
        spec.title = Some(Regex::new("Cursor").unwrap());
        assert!(!spec.matches(&window));
        spec.title = Some(Regex::new("Visual Studio Code$").unwrap());
        spec.pids = BTreeSet::from([11]);
        assert!(!spec.matches(&window));
    }
}
