//! Where each key and list item of a YAML document starts, by path (`interfaces[2].family`), so that diagnostics can point at a line and column.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// Positions of every mapping key and sequence item, by path.
#[derive(Debug, Default, Clone)]
pub struct SpanIndex {
    /// Read by `build.rs` too (which includes this file) to write the built-in
    /// registry's table.
    pub(crate) positions: HashMap<String, Position>,
    /// The same, as a table sorted by path: the built-in registry's, made when the
    /// binary was built ([`SpanIndex::from_table`]).
    table: &'static [(&'static str, Position)],
}

impl SpanIndex {
    /// Indexes a document; a document the event parser cannot read yields an empty index
    /// (the syntax error is reported by the deserializer).
    pub fn build(text: &str) -> SpanIndex {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        let _ = parser.load(&mut builder, false);
        SpanIndex {
            positions: builder.positions,
            table: &[],
        }
    }

    /// An index from a table sorted by path (what `build.rs` writes for the built-in
    /// registry: no parse of its YAML at start).
    pub fn from_table(table: &'static [(&'static str, Position)]) -> SpanIndex {
        SpanIndex {
            positions: HashMap::new(),
            table,
        }
    }

    fn get(&self, path: &str) -> Option<Position> {
        if let Some(position) = self.positions.get(path) {
            return Some(*position);
        }
        self.table
            .binary_search_by(|(key, _)| (*key).cmp(path))
            .ok()
            .map(|at| self.table[at].1)
    }

    /// The position of `path`, or of its nearest indexed ancestor.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut current = path.to_string();
        loop {
            if let Some(position) = self.get(&current) {
                return Some(position);
            }
            let cut = current.rfind(['.', '['])?;
            current.truncate(cut);
        }
    }
}

enum Frame {
    /// `item_path`: a list item whose position is only known at its first key (the event
    /// parser marks a block mapping's start after that key).
    Mapping {
        key: Option<String>,
        item_path: Option<String>,
    },
    Sequence {
        index: usize,
    },
}

#[derive(Default)]
struct Builder {
    deferred: Option<String>,
    stack: Vec<Frame>,
    path: Vec<String>,
    positions: HashMap<String, Position>,
}

impl Builder {
    fn joined(&self) -> String {
        let mut out = String::new();
        for segment in &self.path {
            if segment.starts_with('[') || out.is_empty() {
                out.push_str(segment);
            } else {
                out.push('.');
                out.push_str(segment);
            }
        }
        out
    }

    /// Called for every node; returns true when the node was a mapping key. A list item
    /// that is a mapping is recorded later, at its first key (`deferred`).
    fn node_starts(&mut self, mark: Marker, scalar: Option<&str>, is_mapping: bool) -> bool {
        let position = Position {
            line: mark.line(),
            column: mark.col() + 1,
        };
        match self.stack.last_mut() {
            Some(Frame::Mapping { key, item_path }) if key.is_none() => {
                let name = scalar.unwrap_or("?").to_string();
                *key = Some(name.clone());
                if let Some(item) = item_path.take() {
                    self.positions.insert(item, position);
                }
                self.path.push(name);
                let joined = self.joined();
                self.positions.insert(joined, position);
                true
            }
            Some(Frame::Sequence { index }) => {
                let segment = format!("[{index}]");
                *index += 1;
                self.path.push(segment);
                let joined = self.joined();
                if is_mapping {
                    self.deferred = Some(joined);
                } else {
                    self.positions.insert(joined, position);
                }
                false
            }
            _ => false,
        }
    }

    /// Called when a value node (scalar, alias, or a container at its end) is complete.
    fn value_done(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Mapping { key, .. }) if key.is_some() => {
                *key = None;
                self.path.pop();
            }
            Some(Frame::Sequence { .. }) => {
                self.path.pop();
            }
            _ => {}
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(value, ..) if !self.node_starts(mark, Some(&value), false) => {
                self.value_done();
            }
            Event::Alias(_) if !self.node_starts(mark, None, false) => {
                self.value_done();
            }
            Event::MappingStart(..) => {
                self.node_starts(mark, None, true);
                let item_path = self.deferred.take();
                self.stack.push(Frame::Mapping {
                    key: None,
                    item_path,
                });
            }
            Event::SequenceStart(..) => {
                self.node_starts(mark, None, false);
                self.stack.push(Frame::Sequence { index: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
                self.value_done();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_keys_and_items_by_path() {
        let text = "interfaces:\n  - id: a\n    family: ide_control\n  - id: b\n    requires:\n      binaries: [x, y]\npolicy:\n  allow_os_injection: false\n";
        let index = SpanIndex::build(text);
        let at = |path: &str| index.find(path).map(|p| (p.line, p.column));
        assert_eq!(at("interfaces"), Some((1, 1)));
        assert_eq!(at("interfaces[0]"), Some((2, 5)));
        assert_eq!(at("interfaces[0].family"), Some((3, 5)));
        assert_eq!(at("interfaces[1].id"), Some((4, 5)));
        assert_eq!(at("interfaces[1].requires.binaries[1]"), Some((6, 21)));
        assert_eq!(at("policy.allow_os_injection"), Some((8, 3)));
        // An unknown deeper path falls back to its nearest ancestor.
        assert_eq!(at("interfaces[1].requires.env"), Some((5, 5)));
    }
}
