//! The merged registry as the faces show it (`koru registry show --json`, `GET /api/v1/interfaces`): the layers, their problems, the policy and every interface, each value with the layer it came from.

use std::collections::BTreeMap;

use koru_registry::Loaded;

/// The merged registry as `koru registry show --json` prints it (and `GET /api/v1/interfaces`
/// answers): the layers, their problems, the policy and every interface, each value with the
/// layer it came from.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RegistryView {
    pub layers: Vec<koru_registry::LayerReport>,
    pub diagnostics: Vec<koru_registry::Diagnostic>,
    pub policy: koru_registry::Policy,
    pub policy_origins: BTreeMap<String, koru_registry::Origin>,
    pub interfaces: Vec<InterfaceView>,
}

/// One interface and where each of its fields was set.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct InterfaceView {
    pub interface: koru_registry::Interface,
    pub origins: Option<BTreeMap<String, koru_registry::Origin>>,
}

impl RegistryView {
    pub fn of(loaded: &Loaded) -> Self {
        let registry = &loaded.registry;
        RegistryView {
            layers: registry.layers.clone(),
            diagnostics: loaded.diagnostics.clone(),
            policy: registry.policy.clone(),
            policy_origins: registry.policy_origins().clone(),
            interfaces: registry
                .interfaces()
                .iter()
                .map(|interface| InterfaceView {
                    interface: interface.clone(),
                    origins: registry.origins(&interface.id).cloned(),
                })
                .collect(),
        }
    }
}
