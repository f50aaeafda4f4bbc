//! Reading registry layers: the file format (every field optional but `id`), located diagnostics, the field-by-field merge of layers with the origin of every value, and the checks that need the merged whole.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{
    AppliesTo, Authority, BlockerCode, Direction, Family, Interface, NotifyPolicy, Policy,
    ProductPolicy, Recovery, Requires, RouteKind, Step, StepStage, Transport, Verification,
};
use crate::spans::{Position, SpanIndex};

/// Which layer a value came from; later layers override earlier ones.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// `registry/default.yaml`, embedded in the binary.
    BuiltIn,
    /// `$XDG_CONFIG_HOME/koru/registry.yaml`.
    User,
    /// `.koru/registry.yaml` in a workspace.
    Project,
    /// `--registry FILE`.
    CommandLine,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::BuiltIn => "built-in",
            Layer::User => "user",
            Layer::Project => "project",
            Layer::CommandLine => "command-line",
        }
    }
}

/// The text of one layer and where it came from.
#[derive(Debug, Clone)]
pub struct LayerSource {
    pub layer: Layer,
    /// How diagnostics name the file.
    pub name: String,
    pub path: Option<PathBuf>,
    pub text: String,
}

impl LayerSource {
    /// The embedded default registry.
    pub fn built_in() -> LayerSource {
        LayerSource {
            layer: Layer::BuiltIn,
            name: "<built-in>/registry/default.yaml".into(),
            path: None,
            text: crate::DEFAULT_REGISTRY_YAML.to_string(),
        }
    }

    /// Reads a layer file: `Ok(None)` when it does not exist.
    pub fn read(layer: Layer, path: &Path) -> Result<Option<LayerSource>, Diagnostic> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(LayerSource {
                layer,
                name: path.display().to_string(),
                path: Some(path.to_path_buf()),
                text,
            })),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Diagnostic {
                file: path.display().to_string(),
                line: 0,
                column: 0,
                message: format!("cannot read the {} registry layer: {err}", layer.as_str()),
            }),
        }
    }
}

/// One problem, with its location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based; 0 when the problem is the file as a whole.
    pub line: usize,
    /// 1-based; 0 when unknown.
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (0, _) => write!(f, "{}: {}", self.file, self.message),
            (line, 0) => write!(f, "{}:{line}: {}", self.file, self.message),
            (line, column) => write!(f, "{}:{line}:{column}: {}", self.file, self.message),
        }
    }
}

/// Where a merged value was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Origin {
    pub layer: Layer,
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// One interface entry as a layer file may write it: everything but `id` optional, so that
/// an override layer can change single fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterfaceEntry {
    /// Stable identifier: lowercase letters, digits and `_`, starting with a letter.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<Authority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_modes: Option<Vec<BlockerCode>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_recovery: Option<Vec<Recovery>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_to: Option<AppliesTo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Requires>,
    /// Where its data lives: `~`, `$VAR`, `${VAR}`, `${VAR:-default}` (the default used
    /// when the variable is unset or empty) and `{a,b}` alternatives (one location each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
    /// A key the daemon presses into the plugin's verified window after `pasted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_key: Option<String>,
    /// After `submit_key`: how long the agent of `applies_to.agents` has to record the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_record_ms: Option<u64>,
    /// How the daemon types into a terminal agent (routes `terminal_input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<crate::model::TerminalInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_safe: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `false` disables the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The policy section as a layer file may write it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_order: Option<Vec<RouteKind>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_os_injection: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste_chord: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_chord: Option<String>,
    /// `{class regex: chord}`: paste chords by window class (e.g. terminals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste_chord_by_class: Option<BTreeMap<String, String>>,
    /// Send in a new chat when the submit key cannot be pressed here (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_chat_when_key_unpressable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub products: Option<BTreeMap<String, ProductPolicy>>,
    /// Desktop notifications: `{on: [events], actions: bool, burst: N, per_minute: N}`;
    /// a field left out takes its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<NotifyPolicy>,
}

/// A registry file: both keys optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryFile {
    #[serde(default)]
    pub interfaces: Vec<InterfaceEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyEntry>,
}

/// The merged registry with the origin of every value.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    interfaces: Vec<Interface>,
    pub policy: Policy,
    /// `origins[id][field]`.
    origins: HashMap<String, BTreeMap<String, Origin>>,
    policy_origins: BTreeMap<String, Origin>,
    /// The layers that were merged, in order.
    pub layers: Vec<LayerReport>,
}

/// What happened to one layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LayerReport {
    pub layer: Layer,
    pub file: String,
    /// False when the layer had errors and was left out.
    pub applied: bool,
    pub diagnostics: usize,
}

impl Registry {
    /// All interfaces, enabled or not, in the order they were first defined.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    pub fn get(&self, id: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.id == id)
    }

    /// Where each field of an interface was set.
    pub fn origins(&self, id: &str) -> Option<&BTreeMap<String, Origin>> {
        self.origins.get(id)
    }

    pub fn policy_origins(&self) -> &BTreeMap<String, Origin> {
        &self.policy_origins
    }
}

/// A merged registry and every diagnostic found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub registry: Registry,
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    pub fn is_clean(&self) -> bool {
        self.diagnostics.is_empty()
    }
}

struct ParsedLayer {
    source_layer: Layer,
    name: String,
    entries: Vec<(InterfaceEntry, Map<String, Value>, String)>,
    policy: Option<(Map<String, Value>, String)>,
    spans: SpanIndex,
}

impl ParsedLayer {
    fn origin(&self, path: &str) -> Origin {
        let position = self.spans.find(path).unwrap_or_default();
        Origin {
            layer: self.source_layer,
            file: self.name.clone(),
            line: position.line,
            column: position.column,
        }
    }

    /// Checks one entry of the layer (the `index`th) and keeps it when it is sound: the
    /// checks that need no other entry or layer (id, products, recovery ids, locations).
    fn accept(
        &mut self,
        entry: InterfaceEntry,
        index: usize,
        seen_ids: &mut HashMap<String, usize>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        let prefix = format!("interfaces[{index}]");
        let id_path = format!("{prefix}.id");
        if !valid_id(&entry.id) {
            diagnostics.push(diagnostic_at(
                &self.name,
                self.spans.find(&id_path),
                format!(
                    "interface id {:?} must be lowercase letters, digits and `_`, starting with a letter",
                    entry.id
                ),
            ));
            return;
        }
        if let Some(first) = seen_ids.insert(entry.id.clone(), index) {
            let first_line = self
                .spans
                .find(&format!("interfaces[{first}].id"))
                .map(|p| p.line)
                .unwrap_or_default();
            diagnostics.push(diagnostic_at(
                &self.name,
                self.spans.find(&id_path),
                format!(
                    "duplicate interface id `{}` (first defined on line {first_line})",
                    entry.id
                ),
            ));
            return;
        }
        for (pattern_index, pattern) in entry
            .applies_to
            .iter()
            .flat_map(|a| a.products.iter())
            .enumerate()
        {
            if !valid_product_pattern(pattern) {
                diagnostics.push(diagnostic_at(
                    &self.name,
                    self.spans.find(&format!("{prefix}.applies_to.products[{pattern_index}]")),
                    format!("product pattern {pattern:?} must be `any`, `vscode-family`, a product name such as `cursor`, or a prefix ending in `*` such as `jetbrains-*`"),
                ));
            }
        }
        let mut seen_recovery = HashSet::new();
        for (recovery_index, recovery) in entry.operator_recovery.iter().flatten().enumerate() {
            if !seen_recovery.insert(recovery.id.clone()) {
                diagnostics.push(diagnostic_at(
                    &self.name,
                    self.spans
                        .find(&format!("{prefix}.operator_recovery[{recovery_index}].id")),
                    format!(
                        "duplicate recovery id `{}` in interface `{}`",
                        recovery.id, entry.id
                    ),
                ));
            }
        }
        let mut entry = entry;
        if let Some(locations) = entry.locations.take() {
            let mut expanded = Vec::new();
            for (location_index, location) in locations.iter().enumerate() {
                match crate::alternatives::expand_alternatives(location) {
                    Ok(paths) => expanded.extend(paths),
                    Err(problem) => diagnostics.push(diagnostic_at(
                        &self.name,
                        self.spans
                            .find(&format!("{prefix}.locations[{location_index}]")),
                        format!("location: {problem}"),
                    )),
                }
            }
            entry.locations = Some(expanded);
        }
        let object = match serde_json::to_value(&entry) {
            Ok(Value::Object(object)) => object,
            _ => return,
        };
        self.entries.push((entry, object, prefix));
    }
}

fn diagnostic_at(name: &str, position: Option<Position>, message: String) -> Diagnostic {
    let position = position.unwrap_or_default();
    Diagnostic {
        file: name.to_string(),
        line: position.line,
        column: position.column,
        message,
    }
}

/// Deserializes `value` as `T`, collecting every unknown field (each removed and retried)
/// and then the first type error, each with its path below `prefix`.
fn deserialize_collecting<T: serde::de::DeserializeOwned>(
    mut value: serde_yaml_ng::Value,
    prefix: &str,
    name: &str,
    spans: &SpanIndex,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<T> {
    let mut removed: Vec<String> = Vec::new();
    for _ in 0..64 {
        let result = serde_path_to_error::deserialize::<_, T>(value.clone());
        let error = match result {
            Ok(parsed) => return Some(parsed),
            Err(error) => error,
        };
        let inner = error.inner().to_string();
        let relative = error.path().to_string();
        let inner_message = strip_yaml_position(&inner);
        if let Some(field) = unknown_field_name(&inner_message) {
            // The path names the map holding the unknown key (or the key itself).
            let holder = if relative == "." {
                String::new()
            } else {
                relative.clone()
            };
            let holder = holder
                .strip_suffix(&format!(".{field}"))
                .or_else(|| (holder == field).then_some(""))
                .unwrap_or(&holder)
                .to_string();
            let full = join_path(prefix, &join_path(&holder, &field));
            diagnostics.push(diagnostic_at(
                name,
                spans.find(&full),
                format!("{}: {inner_message}", describe_path(&full)),
            ));
            if remove_key(&mut value, &holder, &field) {
                continue;
            }
            return None;
        }
        // A missing field that we removed ourselves after reporting it: already said.
        if inner_message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .is_some_and(|field| removed.iter().any(|r| r == field))
        {
            return None;
        }
        let full = join_path(prefix, if relative == "." { "" } else { &relative });
        diagnostics.push(diagnostic_at(
            name,
            spans.find(&full),
            format!("{}: {inner_message}", describe_path(&full)),
        ));
        // Drop the offending field and go on, so every bad field of the entry is reported.
        let (holder, field) = match relative.rfind('.') {
            Some(cut) => (&relative[..cut], &relative[cut + 1..]),
            None => ("", relative.as_str()),
        };
        if relative == "." || field.contains('[') || !remove_key(&mut value, holder, field) {
            return None;
        }
        removed.push(field.to_string());
    }
    None
}

fn describe_path(path: &str) -> String {
    if path.is_empty() {
        "the file".to_string()
    } else {
        format!("`{path}`")
    }
}

fn join_path(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => prefix.to_string(),
        _ if rest.starts_with('[') => format!("{prefix}{rest}"),
        _ => format!("{prefix}.{rest}"),
    }
}

fn strip_yaml_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(cut) => message[..cut].to_string(),
        None => message.to_string(),
    }
}

fn unknown_field_name(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Removes `field` from the mapping at `holder` (a serde path like `requires` or `operator_recovery[0]`).
fn remove_key(value: &mut serde_yaml_ng::Value, holder: &str, field: &str) -> bool {
    let mut current = value;
    if !holder.is_empty() {
        for segment in split_path(holder) {
            let next = match segment {
                PathSegment::Key(key) => current.get_mut(key.as_str()),
                PathSegment::Index(index) => current.get_mut(index),
            };
            match next {
                Some(next) => current = next,
                None => return false,
            }
        }
    }
    match current.as_mapping_mut() {
        Some(mapping) => mapping.remove(field).is_some(),
        None => false,
    }
}

enum PathSegment {
    Key(String),
    Index(usize),
}

fn split_path(path: &str) -> Vec<PathSegment> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(bracket) = rest.find('[') {
            if bracket > 0 {
                out.push(PathSegment::Key(rest[..bracket].to_string()));
            }
            rest = &rest[bracket..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let end = stripped.find(']').unwrap_or(stripped.len());
                if let Ok(index) = stripped[..end].parse() {
                    out.push(PathSegment::Index(index));
                }
                rest = stripped.get(end + 1..).unwrap_or("");
            }
        } else if !rest.is_empty() {
            out.push(PathSegment::Key(rest.to_string()));
        }
    }
    out
}

/// The built-in registry as JSON, made from `default.yaml` by build.rs (`null` when it
/// did not convert).
const BUILT_IN_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/default_registry.json"));

/// The positions of the built-in registry's keys and list items, sorted by path (build.rs).
static BUILT_IN_SPANS: &[(&str, Position)] =
    include!(concat!(env!("OUT_DIR"), "/default_spans.rs"));

fn parse_layer(source: &LayerSource, diagnostics: &mut Vec<Diagnostic>) -> Option<ParsedLayer> {
    if source.layer == Layer::BuiltIn && source.text == crate::DEFAULT_REGISTRY_YAML {
        if let Some(parsed) = parse_built_in(source) {
            return Some(parsed);
        }
    }
    parse_yaml_layer(source, diagnostics)
}

/// The built-in layer from what build.rs made of `default.yaml` (its JSON and positions):
/// the same entries, checks and positions as reading its YAML gives, without parsing the
/// YAML twice at every start (a tenth of a restart's instructions). `None` unless that
/// comes out clean: the YAML is then read, and its diagnostics are the YAML's own. Files
/// a user writes are always read as YAML.
fn parse_built_in(source: &LayerSource) -> Option<ParsedLayer> {
    let file: RegistryFile = serde_json::from_str(BUILT_IN_JSON).ok()?;
    let mut parsed = ParsedLayer {
        source_layer: source.layer,
        name: source.name.clone(),
        entries: Vec::with_capacity(file.interfaces.len()),
        policy: None,
        spans: SpanIndex::from_table(BUILT_IN_SPANS),
    };
    let mut diagnostics = Vec::new();
    let mut seen_ids = HashMap::new();
    for (index, entry) in file.interfaces.into_iter().enumerate() {
        parsed.accept(entry, index, &mut seen_ids, &mut diagnostics);
    }
    if let Some(policy) = file.policy {
        let Ok(Value::Object(object)) = serde_json::to_value(&policy) else {
            return None;
        };
        parsed.policy = Some((object, "policy".into()));
    }
    diagnostics.is_empty().then_some(parsed)
}

/// A layer read from its YAML, every problem reported with its position.
fn parse_yaml_layer(
    source: &LayerSource,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ParsedLayer> {
    let before = diagnostics.len();
    let name = source.name.as_str();
    let document: serde_yaml_ng::Value = match serde_yaml_ng::from_str(&source.text) {
        Ok(document) => document,
        Err(error) => {
            let position = error.location().map(|l| Position {
                line: l.line(),
                column: l.column(),
            });
            diagnostics.push(diagnostic_at(
                name,
                position,
                format!(
                    "YAML syntax error: {}",
                    strip_yaml_position(&error.to_string())
                ),
            ));
            return None;
        }
    };
    let spans = SpanIndex::build(&source.text);
    let mut parsed = ParsedLayer {
        source_layer: source.layer,
        name: name.to_string(),
        entries: Vec::new(),
        policy: None,
        spans,
    };
    let top = match document {
        serde_yaml_ng::Value::Null => return Some(parsed),
        serde_yaml_ng::Value::Mapping(top) => top,
        _ => {
            diagnostics.push(diagnostic_at(
                name,
                Some(Position { line: 1, column: 1 }),
                "a registry file is a mapping with the keys `interfaces` and `policy`".into(),
            ));
            return None;
        }
    };
    let mut seen_ids: HashMap<String, usize> = HashMap::new();
    for (key, value) in top {
        let key_name = key.as_str().unwrap_or("?").to_string();
        match key_name.as_str() {
            "interfaces" => {
                let Some(items) = value.as_sequence() else {
                    if !value.is_null() {
                        diagnostics.push(diagnostic_at(
                            name,
                            parsed.spans.find("interfaces"),
                            "`interfaces` must be a list of interface entries".into(),
                        ));
                    }
                    continue;
                };
                for (index, item) in items.iter().enumerate() {
                    let prefix = format!("interfaces[{index}]");
                    let Some(entry) = deserialize_collecting::<InterfaceEntry>(
                        item.clone(),
                        &prefix,
                        name,
                        &parsed.spans,
                        diagnostics,
                    ) else {
                        continue;
                    };
                    parsed.accept(entry, index, &mut seen_ids, diagnostics);
                }
            }
            "policy" => {
                if value.is_null() {
                    continue;
                }
                if let Some(policy) = deserialize_collecting::<PolicyEntry>(
                    value,
                    "policy",
                    name,
                    &parsed.spans,
                    diagnostics,
                ) {
                    if let Ok(Value::Object(object)) = serde_json::to_value(&policy) {
                        parsed.policy = Some((object, "policy".into()));
                    }
                }
            }
            other => diagnostics.push(diagnostic_at(
                name,
                parsed.spans.find(other),
                format!("unknown top-level key `{other}`, expected `interfaces` or `policy`"),
            )),
        }
    }
    (diagnostics.len() == before).then_some(parsed)
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn valid_product_pattern(pattern: &str) -> bool {
    let body = pattern.strip_suffix('*').unwrap_or(pattern);
    !body.is_empty()
        && body
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// What is wrong with an interface's `terminal` section, if anything: it belongs to
/// `terminal_input` routes (which need it), its key names and patterns must be usable.
fn terminal_problem(interface: &Interface) -> Option<String> {
    let is_terminal_route = interface.route == Some(RouteKind::TerminalInput);
    let Some(terminal) = &interface.terminal else {
        return is_terminal_route.then(|| {
            "a `terminal_input` route needs a `terminal` section (submit key, delays, screen markers)".into()
        });
    };
    // A terminal agent's own server (opencode's, transport `http`, route `native_send`)
    // uses the section's `proof_ms` only.
    let is_agent_server_route = interface.route == Some(RouteKind::NativeSend)
        && interface.transport == crate::model::Transport::Http
        && interface.surface == "terminal_agent";
    if !is_terminal_route && !is_agent_server_route {
        return Some(
            "`terminal` belongs to routes `terminal_input` (and `native_send` to a terminal agent's own server: transport `http`, surface `terminal_agent`)".into(),
        );
    }
    if terminal.submit_key.trim().is_empty()
        || !terminal
            .submit_key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Some(format!(
            "`terminal.submit_key` {:?} is not a tmux key name such as `Enter`",
            terminal.submit_key
        ));
    }
    let screen = &terminal.screen;
    for (field, patterns) in [
        ("dialog", &screen.dialog),
        ("input", &screen.input),
        ("busy", &screen.busy),
    ] {
        for pattern in patterns {
            if let Err(err) = check_pattern(pattern) {
                let why = err.lines().last().unwrap_or_default().trim().to_string();
                return Some(format!(
                    "`terminal.screen.{field}`: {pattern:?} is not a valid regular expression ({why})"
                ));
            }
        }
    }
    for pattern in &screen.input {
        if check_pattern(pattern).is_ok_and(|groups| groups < 1) {
            return Some(format!(
                "`terminal.screen.input`: {pattern:?} needs a capture group for what is typed"
            ));
        }
    }
    None
}

/// Whether `pattern` is a regular expression the `regex` crate accepts, and how many
/// capture groups it names or numbers; otherwise the parser's message. Parsed, not
/// compiled: the registry is checked at every start and compiling its ~100 patterns into
/// automata was a fifth of the daemon's start-up instructions. What uses a pattern
/// compiles it when it is needed.
fn check_pattern(pattern: &str) -> Result<usize, String> {
    regex_syntax::Parser::new()
        .parse(pattern)
        .map(|hir| hir.properties().explicit_captures_len())
        .map_err(|err| err.to_string())
}

/// What is wrong with an interface's `submit_key`, if anything: the key is pressed after
/// the plugin's steps proved `pasted`, so they must prove it and must not submit themselves.
fn submit_key_problem(interface: &Interface) -> Option<String> {
    let key = interface.submit_key.as_deref()?;
    if key.trim().is_empty() {
        return Some("`submit_key` is empty; name a key such as `Return`".into());
    }
    if !matches!(
        interface.route,
        Some(RouteKind::PluginDrive) | Some(RouteKind::NativeSend)
    ) {
        return Some(
            "`submit_key` needs a plugin route (`plugin_drive` or `native_send`): the key is pressed after the plugin's steps".into(),
        );
    }
    if !interface
        .steps
        .iter()
        .any(|step| step.proves == StepStage::Pasted)
    {
        return Some(
            "`submit_key` is pressed after a step proving `pasted`, and no step proves it".into(),
        );
    }
    if interface
        .steps
        .iter()
        .any(|step| step.proves == StepStage::Submitted)
    {
        return Some(
            "a step proves `submitted` and `submit_key` would submit again: keep one of them"
                .into(),
        );
    }
    None
}

/// What is wrong with an interface's `agent_record_ms`, if anything: it waits for the
/// record of an agent named in `applies_to.agents` after the route's `submit_key`.
fn agent_record_problem(interface: &Interface) -> Option<String> {
    let wait = interface.agent_record_ms?;
    if interface.submit_key.is_none() {
        return Some(
            "`agent_record_ms` waits after `submit_key`, and the interface has none".into(),
        );
    }
    if interface.applies_to.agents.is_empty() {
        return Some(
            "`agent_record_ms` waits for an agent's own record: name the agent in `applies_to.agents`".into(),
        );
    }
    if wait == 0 {
        return Some(
            "`agent_record_ms` is 0; give the agent time to record the prompt (for example 15000)"
                .into(),
        );
    }
    None
}

/// A diagnostic at a merged value's origin (or at the file as a whole when unknown).
fn diagnostic_from(origin: Option<&Origin>, message: String) -> Diagnostic {
    Diagnostic {
        file: origin.map(|o| o.file.clone()).unwrap_or_default(),
        line: origin.map(|o| o.line).unwrap_or_default(),
        column: origin.map(|o| o.column).unwrap_or_default(),
        message,
    }
}

/// Fields an interface must have once all layers are merged.
const REQUIRED_FIELDS: &[&str] = &[
    "description",
    "family",
    "direction",
    "transport",
    "surface",
    "authority",
    "verification",
];

/// Loads and merges layers in the order given (each overrides the ones before it).
///
/// A layer with any error is left out as a whole and reported; an entry that is still
/// incomplete after merging is left out and reported. The result is always usable.
pub fn load(sources: &[LayerSource]) -> Loaded {
    let mut diagnostics = Vec::new();
    let mut layers = Vec::new();
    let mut parsed_layers = Vec::new();
    for source in sources {
        let before = diagnostics.len();
        let parsed = parse_layer(source, &mut diagnostics);
        layers.push(LayerReport {
            layer: source.layer,
            file: source.name.clone(),
            applied: parsed.is_some(),
            diagnostics: diagnostics.len() - before,
        });
        if let Some(parsed) = parsed {
            parsed_layers.push(parsed);
        }
    }

    // Field-by-field merge, remembering where each value came from.
    let mut order: Vec<String> = Vec::new();
    let mut merged: HashMap<String, Map<String, Value>> = HashMap::new();
    let mut origins: HashMap<String, BTreeMap<String, Origin>> = HashMap::new();
    let mut policy = Map::new();
    let mut policy_origins = BTreeMap::new();
    for parsed in &parsed_layers {
        for (entry, object, prefix) in &parsed.entries {
            if !merged.contains_key(&entry.id) {
                order.push(entry.id.clone());
            }
            let target = merged.entry(entry.id.clone()).or_default();
            let entry_origins = origins.entry(entry.id.clone()).or_default();
            for (field, value) in object {
                target.insert(field.clone(), value.clone());
                let path = format!("{prefix}.{field}");
                entry_origins.insert(field.clone(), parsed.origin(&path));
            }
        }
        if let Some((object, prefix)) = &parsed.policy {
            for (field, value) in object {
                if field == "products" {
                    // Products merge per product key, so a layer can add one product's rules.
                    let products = policy
                        .entry("products")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let (Value::Object(into), Value::Object(from)) = (products, value) {
                        for (product, rules) in from {
                            into.insert(product.clone(), rules.clone());
                            policy_origins.insert(
                                format!("products.{product}"),
                                parsed.origin(&format!("{prefix}.products.{product}")),
                            );
                        }
                    }
                    continue;
                }
                policy.insert(field.clone(), value.clone());
                policy_origins.insert(field.clone(), parsed.origin(&format!("{prefix}.{field}")));
            }
        }
    }

    let mut interfaces = Vec::new();
    for id in &order {
        let object = merged.remove(id).unwrap_or_default();
        let missing: Vec<String> = REQUIRED_FIELDS
            .iter()
            .filter(|field| !object.contains_key(**field))
            .map(|field| format!("`{field}`"))
            .collect();
        if !missing.is_empty() {
            let origin = origins[id].get("id").cloned();
            diagnostics.push(diagnostic_from(
                origin.as_ref(),
                format!(
                    "interface `{id}` is new in this layer and lacks required field{} {}",
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                ),
            ));
            origins.remove(id);
            continue;
        }
        match serde_path_to_error::deserialize::<_, Interface>(Value::Object(object)) {
            Ok(interface) => interfaces.push(interface),
            Err(error) => {
                let origin = origins[id].get("id").cloned();
                diagnostics.push(diagnostic_from(
                    origin.as_ref(),
                    format!("interface `{id}`: {}", error.into_inner()),
                ));
                origins.remove(id);
            }
        }
    }

    let mut resolved_policy = Policy::default();
    if let Some(Value::Array(route_order)) = policy.get("route_order") {
        resolved_policy.route_order = route_order
            .iter()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect();
    }
    if let Some(Value::Bool(allow)) = policy.get("allow_os_injection") {
        resolved_policy.allow_os_injection = *allow;
    }
    if let Some(Value::Bool(allow)) = policy.get("new_chat_when_key_unpressable") {
        resolved_policy.new_chat_when_key_unpressable = *allow;
    }
    if let Some(Value::String(chord)) = policy.get("paste_chord") {
        resolved_policy.paste_chord = chord.clone();
    }
    if let Some(Value::String(chord)) = policy.get("submit_chord") {
        resolved_policy.submit_chord = chord.clone();
    }
    if let Some(map) = policy.get("paste_chord_by_class") {
        resolved_policy.paste_chord_by_class =
            serde_json::from_value(map.clone()).unwrap_or_default();
        for pattern in resolved_policy.paste_chord_by_class.keys() {
            if let Err(err) = check_pattern(pattern) {
                let origin = policy_origins.get("paste_chord_by_class").cloned();
                diagnostics.push(diagnostic_from(origin.as_ref(), format!("`policy.paste_chord_by_class`: {pattern:?} is not a valid regular expression: {err}")));
            }
        }
    }
    if let Some(products) = policy.get("products") {
        resolved_policy.products = serde_json::from_value(products.clone()).unwrap_or_default();
    }
    if let Some(notify) = policy.get("notify") {
        // The layer's own parse checked it; a value that still does not fit keeps the default.
        resolved_policy.notify = serde_json::from_value(notify.clone()).unwrap_or_default();
    }

    // References that need the merged whole.
    let known: HashSet<&str> = interfaces.iter().map(|i| i.id.as_str()).collect();
    for interface in &interfaces {
        for dependency in &interface.depends_on {
            if !known.contains(dependency.as_str()) {
                let origin = &origins[&interface.id]["depends_on"];
                diagnostics.push(Diagnostic {
                    file: origin.file.clone(),
                    line: origin.line,
                    column: origin.column,
                    message: format!(
                        "interface `{}` depends on `{dependency}`, which no layer defines",
                        interface.id
                    ),
                });
            }
        }
    }
    for interface in &interfaces {
        if let Some(problem) = terminal_problem(interface) {
            let origins = &origins[&interface.id];
            let origin = origins
                .get("terminal")
                .or_else(|| origins.get("route"))
                .cloned();
            diagnostics.push(diagnostic_from(
                origin.as_ref(),
                format!("interface `{}`: {problem}", interface.id),
            ));
        }
        if let Some(problem) = submit_key_problem(interface) {
            let origin = origins[&interface.id].get("submit_key").cloned();
            diagnostics.push(diagnostic_from(
                origin.as_ref(),
                format!("interface `{}`: {problem}", interface.id),
            ));
        }
        if let Some(problem) = agent_record_problem(interface) {
            let origins = &origins[&interface.id];
            let origin = origins
                .get("agent_record_ms")
                .or_else(|| origins.get("submit_key"))
                .cloned();
            diagnostics.push(diagnostic_from(
                origin.as_ref(),
                format!("interface `{}`: {problem}", interface.id),
            ));
        }
    }
    for (product, rules) in &resolved_policy.products {
        for pattern in rules.window_class.iter().chain(rules.window_title.iter()) {
            if let Err(err) = check_pattern(pattern) {
                let origin = policy_origins.get(&format!("products.{product}")).cloned();
                diagnostics.push(diagnostic_from(origin.as_ref(), format!("policy for `{product}`: {pattern:?} is not a valid regular expression: {err}")));
            }
        }
        for disabled in &rules.disabled {
            if !known.contains(disabled.as_str()) {
                let origin = policy_origins.get(&format!("products.{product}")).cloned();
                diagnostics.push(diagnostic_from(
                    origin.as_ref(),
                    format!("policy for `{product}` disables `{disabled}`, which no layer defines"),
                ));
            }
        }
    }

    Loaded {
        registry: Registry {
            interfaces,
            policy: resolved_policy,
            origins,
            policy_origins,
            layers,
        },
        diagnostics,
    }
}

/// The JSON Schema of a registry file, for editor completion.
pub fn file_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(RegistryFile)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_layer_is_read_from_its_build_time_json_not_its_yaml() {
        // What it means is checked against the YAML in tests/registry.rs; here, that a
        // start does not fall back to parsing the YAML.
        let parsed = parse_built_in(&LayerSource::built_in()).expect("the built-in JSON is clean");
        assert!(parsed.entries.len() > 40);
        assert!(parsed.policy.is_some());
        assert!(parsed
            .spans
            .find("interfaces[0].id")
            .is_some_and(|p| p.line > 0));
    }
}
