//! Route ranking shared by the planner and doctor: which interfaces can deliver a prompt to a given product, in the order policy, authority and priority put them.

use crate::model::{product_matches, Interface, Platform, RouteKind};
use crate::Registry;

/// The policy as it applies to one product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    pub route_order: Vec<RouteKind>,
    pub allow_os_injection: bool,
    pub disabled: Vec<String>,
    pub paste_chord: String,
    pub submit_chord: String,
    pub paste_chord_by_class: Vec<(String, String)>,
    pub window_class: Option<String>,
    pub window_title: Option<String>,
    /// Whether a drive whose submit key cannot be pressed here goes to a new chat instead.
    pub new_chat_when_key_unpressable: bool,
}

/// Applies the per-product rules whose key matches `product`: broad patterns
/// (`vscode-family`, `jetbrains-*`) first, the exact product name last, so the most
/// specific rule wins.
pub fn effective_policy(registry: &Registry, product: &str) -> EffectivePolicy {
    let policy = &registry.policy;
    let mut effective = EffectivePolicy {
        route_order: policy.route_order.clone(),
        allow_os_injection: policy.allow_os_injection,
        disabled: Vec::new(),
        paste_chord: policy.paste_chord.clone(),
        submit_chord: policy.submit_chord.clone(),
        paste_chord_by_class: policy
            .paste_chord_by_class
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        window_class: None,
        window_title: None,
        new_chat_when_key_unpressable: policy.new_chat_when_key_unpressable,
    };
    let mut matching: Vec<(&String, &crate::ProductPolicy)> = policy
        .products
        .iter()
        .filter(|(pattern, _)| product_matches(pattern, product))
        .collect();
    matching.sort_by_key(|(pattern, _)| (pattern.as_str() == product, pattern.len()));
    for (_, rules) in matching {
        if let Some(order) = &rules.route_order {
            effective.route_order = order.clone();
        }
        if let Some(allow) = rules.allow_os_injection {
            effective.allow_os_injection = allow;
        }
        effective.disabled.extend(rules.disabled.iter().cloned());
        if let Some(chord) = &rules.paste_chord {
            effective.paste_chord = chord.clone();
        }
        if let Some(chord) = &rules.submit_chord {
            effective.submit_chord = chord.clone();
        }
        if let Some(pattern) = &rules.window_class {
            effective.window_class = Some(pattern.clone());
        }
        if let Some(pattern) = &rules.window_title {
            effective.window_title = Some(pattern.clone());
        }
        if let Some(allow) = rules.new_chat_when_key_unpressable {
            effective.new_chat_when_key_unpressable = allow;
        }
    }
    effective
}

/// The enabled route interfaces that apply to `product` on `platform`, best first: by the
/// policy's route order, then authority, then priority (higher first), then id. Routes
/// of a kind the policy's order leaves out, or that the product's policy disables, are
/// not candidates.
pub fn rank_routes<'r>(
    registry: &'r Registry,
    product: &str,
    platform: Platform,
) -> Vec<&'r Interface> {
    let policy = effective_policy(registry, product);
    let mut candidates: Vec<(usize, &Interface)> = registry
        .interfaces()
        .iter()
        .filter(|i| i.enabled)
        .filter(|i| !policy.disabled.contains(&i.id))
        .filter(|i| i.applies_to.platforms.contains(&platform))
        .filter(|i| {
            i.applies_to
                .products
                .iter()
                .any(|pattern| product_matches(pattern, product))
        })
        .filter_map(|i| {
            let kind = i.route?;
            let rank = policy.route_order.iter().position(|k| *k == kind)?;
            Some((rank, i))
        })
        .collect();
    candidates.sort_by(|(rank_a, a), (rank_b, b)| {
        rank_a
            .cmp(rank_b)
            .then(a.authority.cmp(&b.authority))
            .then(b.priority.cmp(&a.priority))
            .then(a.id.cmp(&b.id))
    });
    candidates.into_iter().map(|(_, i)| i).collect()
}
