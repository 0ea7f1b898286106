//! The flavors quota is granted on: their pools and capacity, and the settings admins write
//! (node labels, taints, tolerations, MIG layout, sharing) with the parser of their text form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    common::error::FieldError,
    common::validate::is_dns_label,
    fleet::catalogue::{self, Vendor},
    kueue::{FlavorObject, Taint, TaintEffect, Toleration, TolerationOperator},
};

use super::*;

/// A resource flavor: the pools it is made of, its capacity and where Kueue puts its pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flavor {
    pub name: String,
    pub gpu_model: String,
    /// The node pools that make it up.
    pub pools: Vec<String>,
    /// Whole GPUs in those pools.
    pub gpus: i64,
    pub settings: FlavorSettings,
    /// Bumped by every change to the settings; an edit naming an older one is refused (409).
    #[serde(default)]
    pub version: i32,
    /// The product label its model's nodes carry where the inventory says it is not the
    /// catalogue's (`ModelEntry::product_label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_label: Option<String>,
}

/// What admins set on a flavor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorSettings {
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub node_taints: Vec<Taint>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// MIG instances per GPU by profile (`"1g.18gb": 7`); empty for whole GPUs.
    #[serde(default)]
    pub mig_layout: BTreeMap<String, u32>,
    /// How several pods share one of its devices (a card or a MIG instance) when the device
    /// plugin lets them: time-slicing, MPS or HAMi fractions. What the noisy-neighbour view
    /// reports; `None` when pods do not share or admins did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<crate::fleet::sharing::Mechanism>,
}

/// One resource a flavor offers and how much of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    pub resource: String,
    pub amount: i64,
}

impl Flavor {
    fn vendor(&self) -> Vendor {
        catalogue::find(&self.gpu_model).map_or(Vendor::Nvidia, |m| m.vendor)
    }

    /// The labels GPU Feature Discovery (or, outside NVIDIA, the platform team) puts on a node
    /// of its pools, as its sharing offers the cards: the product label (the inventory's for
    /// its model, where it gives one).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let model = catalogue::find(&self.gpu_model).ok();
        let product = match (&self.product_label, model) {
            (Some(own), Some(m)) => m.product_under_name(own, self.settings.sharing),
            (Some(own), None) => own.clone(),
            (None, Some(m)) => m.product_under(self.settings.sharing),
            (None, None) => self.gpu_model.clone(),
        };
        BTreeMap::from([(self.vendor().product_label().to_owned(), product)])
    }

    /// Whole GPUs as the vendor's resource, or, when MIG-partitioned, each profile's
    /// `nvidia.com/mig-<profile>` at instances per GPU × GPUs.
    pub fn resources(&self) -> Vec<Capacity> {
        if self.settings.mig_layout.is_empty() {
            return vec![Capacity {
                resource: catalogue::find(&self.gpu_model)
                    .map_or("nvidia.com/gpu", |m| m.resource.as_str())
                    .to_owned(),
                amount: self.gpus,
            }];
        }
        self.settings
            .mig_layout
            .iter()
            .map(|(profile, per_gpu)| Capacity {
                resource: format!("nvidia.com/mig-{profile}"),
                amount: self.gpus * i64::from(*per_gpu),
            })
            .collect()
    }

    pub fn capacity(&self, resource: &str) -> Option<i64> {
        self.resources()
            .into_iter()
            .find(|c| c.resource == resource)
            .map(|c| c.amount)
    }

    /// The node label that pins the flavor to its model (the product label its nodes carry),
    /// unless admins set their own labels.
    pub fn object(&self) -> FlavorObject {
        let node_labels = if self.settings.node_labels.is_empty() {
            self.node_labels()
        } else {
            self.settings.node_labels.clone()
        };
        FlavorObject {
            name: self.name.clone(),
            node_labels,
            node_taints: self.settings.node_taints.clone(),
            tolerations: self.settings.tolerations.clone(),
        }
    }
}

impl FlavorSettings {
    /// Kubernetes' rules for labels, taints and tolerations (at most 8 of each, as the
    /// ResourceFlavor CRD says) and a MIG layout that fits one GPU of `gpu_model`.
    pub fn validate(&self, gpu_model: &str) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut error = |path: String, message: String| errors.push(FieldError { path, message });
        for (what, count) in [
            ("node_labels", self.node_labels.len()),
            ("node_taints", self.node_taints.len()),
            ("tolerations", self.tolerations.len()),
        ] {
            if count > 8 {
                error(
                    what.into(),
                    format!("at most 8 (Kueue's limit); {count} given"),
                );
            }
        }
        for (key, value) in &self.node_labels {
            let path = format!("node_labels.{key}");
            if let Err(problem) = label_key(key) {
                error(path.clone(), problem);
            }
            if !value.is_empty() && !is_label_value(value) {
                error(path, LABEL_VALUE_RULE.into());
            }
        }
        for (i, taint) in self.node_taints.iter().enumerate() {
            if let Err(problem) = label_key(&taint.key) {
                error(format!("node_taints[{i}].key"), problem);
            }
            if !taint.value.is_empty() && !is_label_value(&taint.value) {
                error(format!("node_taints[{i}].value"), LABEL_VALUE_RULE.into());
            }
        }
        for (i, t) in self.tolerations.iter().enumerate() {
            if t.key.is_empty() && t.operator != TolerationOperator::Exists {
                error(
                    format!("tolerations[{i}].operator"),
                    "must be Exists when the key is empty (it then tolerates every taint)".into(),
                );
            }
            if !t.key.is_empty()
                && let Err(problem) = label_key(&t.key)
            {
                error(format!("tolerations[{i}].key"), problem);
            }
            if t.operator == TolerationOperator::Exists && !t.value.is_empty() {
                error(
                    format!("tolerations[{i}].value"),
                    "must be empty with Exists".into(),
                );
            }
        }
        if !self.mig_layout.is_empty() {
            let layout: Vec<(String, u32)> = self
                .mig_layout
                .iter()
                .map(|(p, n)| (p.clone(), *n))
                .collect();
            if let Err(problem) = crate::packing::mig::fits_one_gpu(gpu_model, &layout) {
                error("mig_layout".into(), problem);
            }
        }
        if let Some(m) = self.sharing
            && !SOFTWARE_SHARING.contains(&m)
        {
            error(
                "sharing".into(),
                "pods share a device by time_slicing, mps or hami_fractions (MIG is the MIG layout; leave it out for whole GPUs)".into(),
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// The ways several pods share one device.
pub const SOFTWARE_SHARING: [crate::fleet::sharing::Mechanism; 3] = [
    crate::fleet::sharing::Mechanism::TimeSlicing,
    crate::fleet::sharing::Mechanism::Mps,
    crate::fleet::sharing::Mechanism::HamiFractions,
];

/// A flavor's settings as lines a person types, one entry per line: node labels `key=value`;
/// taints `key=value:Effect` or `key:Effect`; tolerations `key=value:Effect` (Equal),
/// `key:Effect` or `key` (Exists), `*` (every taint); the MIG layout `profile=instances`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SettingsText {
    pub node_labels: String,
    pub node_taints: String,
    pub tolerations: String,
    pub mig_layout: String,
    /// `time_slicing`, `mps`, `hami_fractions`, or empty.
    #[serde(default)]
    pub sharing: String,
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
}

fn effect(text: &str) -> Option<TaintEffect> {
    match text {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

const EFFECTS: &str = "NoSchedule, PreferNoSchedule or NoExecute";

impl SettingsText {
    pub fn of(settings: &FlavorSettings) -> SettingsText {
        let join = |items: Vec<String>| items.join("\n");
        let kv = |k: &str, v: &str| {
            if v.is_empty() {
                k.to_owned()
            } else {
                format!("{k}={v}")
            }
        };
        SettingsText {
            node_labels: join(
                settings
                    .node_labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
            node_taints: join(
                settings
                    .node_taints
                    .iter()
                    .map(|t| format!("{}:{:?}", kv(&t.key, &t.value), t.effect))
                    .collect(),
            ),
            tolerations: join(
                settings
                    .tolerations
                    .iter()
                    .map(|t| {
                        let head = if t.key.is_empty() {
                            "*".to_owned()
                        } else {
                            kv(&t.key, &t.value)
                        };
                        match t.effect {
                            Some(e) => format!("{head}:{e:?}"),
                            None => head,
                        }
                    })
                    .collect(),
            ),
            mig_layout: join(
                settings
                    .mig_layout
                    .iter()
                    .map(|(p, n)| format!("{p}={n}"))
                    .collect(),
            ),
            sharing: settings
                .sharing
                .map(|m| crate::fleet::sharing::sharing_name(Some(m)).to_owned())
                .unwrap_or_default(),
        }
    }

    /// The settings the lines say; each unreadable line named by field and line number. The
    /// settings' own rules (`FlavorSettings::validate`) apply afterwards.
    pub fn parse(&self) -> Result<FlavorSettings, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut settings = FlavorSettings::default();
        for (n, line) in lines(&self.node_labels) {
            match line.split_once('=') {
                Some((k, v)) => {
                    settings
                        .node_labels
                        .insert(k.trim().to_owned(), v.trim().to_owned());
                }
                None => errors.push(field(
                    "node_labels",
                    format!("line {n}: write key=value, not {line:?}"),
                )),
            }
        }
        for (n, line) in lines(&self.node_taints) {
            match taint(line) {
                Some(t) => settings.node_taints.push(t),
                None => errors.push(field(
                    "node_taints",
                    format!("line {n}: write key=value:Effect or key:Effect (Effect: {EFFECTS}), not {line:?}"),
                )),
            }
        }
        for (n, line) in lines(&self.tolerations) {
            match toleration(line) {
                Ok(t) => settings.tolerations.push(t),
                Err(effect) => errors.push(field(
                    "tolerations",
                    format!("line {n}: the effect must be {EFFECTS}, not {effect:?}"),
                )),
            }
        }
        for (n, line) in lines(&self.mig_layout) {
            match line
                .split_once('=')
                .map(|(p, c)| (p.trim(), c.trim().parse::<u32>()))
            {
                Some((profile, Ok(count))) if count > 0 => {
                    settings.mig_layout.insert(profile.to_owned(), count);
                }
                _ => errors.push(field(
                    "mig_layout",
                    format!("line {n}: write profile=instances per GPU (1g.10gb=7), not {line:?}"),
                )),
            }
        }
        match self.sharing.trim() {
            "" => {}
            text => match crate::fleet::sharing::parse_sharing(text) {
                Some(Some(m)) if SOFTWARE_SHARING.contains(&m) => settings.sharing = Some(m),
                _ => errors.push(field(
                    "sharing",
                    format!("time_slicing, mps, hami_fractions or empty, not {text:?}"),
                )),
            },
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }
}

/// A node taint line, `key=value:Effect` or `key:Effect`.
fn taint(line: &str) -> Option<Taint> {
    let (head, e) = line.rsplit_once(':')?;
    let effect = effect(e.trim())?;
    let (key, value) = head.split_once('=').unwrap_or((head, ""));
    Some(Taint {
        key: key.trim().to_owned(),
        value: value.trim().to_owned(),
        effect,
    })
}

/// A toleration line: `key=value[:Effect]` (Equal), `key[:Effect]` or `*` (Exists); the
/// effect text when it names no effect.
fn toleration(line: &str) -> Result<Toleration, &str> {
    let (head, effect_text) = match line.rsplit_once(':') {
        Some((h, e)) => (h.trim(), Some(e.trim())),
        None => (line, None),
    };
    let effect = match effect_text.map(effect) {
        Some(None) => return Err(effect_text.unwrap_or_default()),
        parsed => parsed.flatten(),
    };
    let (key, value, operator) = match head.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim(), TolerationOperator::Equal),
        None if head == "*" => ("", "", TolerationOperator::Exists),
        None => (head, "", TolerationOperator::Exists),
    };
    Ok(Toleration {
        key: key.to_owned(),
        operator,
        value: value.to_owned(),
        effect,
    })
}

pub const LABEL_VALUE_RULE: &str = "must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

/// A label value or a key's name part.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `[prefix/]name`, the prefix a DNS subdomain.
fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.len() > 253 || !prefix.split('.').all(is_dns_label))
    {
        return Err("the prefix before '/' must be a DNS subdomain (e.g. nvidia.com)".into());
    }
    if is_label_value(name) {
        Ok(())
    } else {
        Err(format!("the name part {LABEL_VALUE_RULE}"))
    }
}
