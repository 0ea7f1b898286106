//! Export: the draft's Kueue and KEDA manifests (`shared::planning::manifests`, the renderer whose
//! objects are tested against the real CRD schemas), each file shown, downloadable and copied
//! to the clipboard, or all of them as one zip.

use leptos::{prelude::*, task::spawn_local};
use shared::planning::manifests::{self, KueueVersion};
use wasm_bindgen::{JsCast, JsValue};

use super::{Results, Run, fields::use_draft};

#[component]
pub fn ExportStep() -> impl IntoView {
    let draft = use_draft();
    let version = RwSignal::new(KueueVersion::V1beta2);
    let results = expect_context::<Results>();
    // The Kueue and KEDA objects, then the MIG partitions the last evaluation laid out (while
    // a newer draft is being evaluated, they follow once it is).
    let files = Memo::new(move |_| {
        let valid = draft.problems.with(Vec::is_empty);
        let done = matches!(results.run.get(), Run::Done { .. });
        let version = version.get();
        (valid && done).then(|| {
            results.evaluation.with(|e| {
                e.as_ref().map_or_else(Vec::new, |e| {
                    draft.scenario.with(|s| export_files(s, e, version))
                })
            })
        })
    });
    let status = RwSignal::new(None::<String>);
    view! {
        <h2>"Export"</h2>
        <p class="muted">
            "The quota set-up as Kueue objects (ResourceFlavors, the Cohort, one ClusterQueue and LocalQueue per team, "
            "WorkloadPriorityClasses) and a KEDA ScaledObject per inference class; apply with "<code>"kubectl apply -f"</code>". "
            "Where classes run on MIG, the partitions as NVIDIA mig-parted configurations."
        </p>
        <label class="field">
            <span>"Kueue API version"</span>
            <select data-test="kueue-version" on:change=move |ev| {
                if let Some(v) = KueueVersion::parse(&event_target_value(&ev)) { version.set(v) }
            }>
                <option value="v1beta2" selected=true>"v1beta2 (Kueue 0.15 and later)"</option>
                <option value="v1beta1">"v1beta1 (older clusters; deprecated, no longer served from Kueue 0.20)"</option>
            </select>
        </label>
        <button type="button" data-test="download-zip" on:click=move |_| {
            let Some(files) = files.get_untracked() else { return };
            let entries: Vec<(&str, &[u8])> = files.iter().map(|(name, yaml, _)| (name.as_str(), yaml.as_bytes())).collect();
            let zip = js_sys::Uint8Array::from(shared::common::zip::store(&entries).as_slice());
            status.set(Some(match download("gpufleet-manifests.zip", &zip, "application/zip") {
                Ok(()) => "gpufleet-manifests.zip downloaded".to_owned(),
                Err(err) => format!("the download did not start: {err:?}"),
            }));
        }>"Download all (zip)"</button>
        {move || status.get().map(|s| view! { <p class="ok" role="status" data-test="export-status">{s}</p> })}
        {move || match files.get() {
            None => view! { <p class="problem" role="alert">"The manifests follow the scenario's evaluation (its isolation plan): fix the scenario's problems, if any, and they appear once it is evaluated."</p> }.into_any(),
            Some(files) => files.into_iter().map(|(name, yaml, what)| view! { <Manifest name yaml what status/> }).collect_view().into_any(),
        }}
    }
}

/// The files of the export: the Kueue and KEDA objects, the admission check, then the MIG
/// partitions and HAMi limits the evaluation laid out; each (name, YAML, what it holds).
fn export_files(
    scenario: &shared::planning::scenario::Scenario,
    e: &shared::planning::Evaluation,
    version: KueueVersion,
) -> Vec<(String, String, String)> {
    let objects = manifests::export(scenario, &e.isolation, version);
    let verdicts = manifests::admission(scenario, &e.isolation);
    let mut files: Vec<(String, String, String)> = objects
        .into_iter()
        .map(|f| {
            let what = format!("({} objects)", f.objects.len());
            (f.name, f.yaml, what)
        })
        .collect();
    let never = verdicts
        .iter()
        .any(|v| v.admissible == shared::kueue::Admissible::Never);
    let what = if never {
        "(some classes' pods would never start: read why)"
    } else {
        "(whether each class's pod starts where the export puts it)"
    };
    files.push((
        manifests::CHECK_FILE.to_owned(),
        shared::kueue::report(&verdicts),
        what.to_owned(),
    ));
    for m in &e.mig {
        if let Ok(plan) = &m.layout {
            files.push((
                format!("mig-parted-{}.yaml", m.flavor),
                plan.mig_parted_yaml.clone(),
                "(NVIDIA mig-parted: label each node nvidia.com/mig.config=<name>)".to_owned(),
            ));
        }
    }
    if let Some(hami) = e.hami_limits.clone() {
        files.push((
            "hami-limits.yaml".to_owned(),
            hami,
            "(HAMi: each class's container limits)".to_owned(),
        ));
    }
    files
}

/// One file of the export, shown, to download or copy; `status` says how that went.
#[component]
fn Manifest(
    name: String,
    yaml: String,
    what: String,
    status: RwSignal<Option<String>>,
) -> impl IntoView {
    let (for_download, for_copy) = ((name.clone(), yaml.clone()), yaml.clone());
    view! {
        <section class="manifest" data-test="manifest" data-name=name.clone()>
            <h3>{name.clone()}" "<span class="muted">{what}</span></h3>
            <button type="button" on:click=move |_| {
                let (name, yaml) = &for_download;
                match download(name, &JsValue::from_str(yaml), "application/yaml") {
                    Ok(()) => status.set(Some(format!("{name} downloaded"))),
                    Err(err) => status.set(Some(format!("the download did not start: {err:?}"))),
                }
            }>"Download"</button>
            <button type="button" on:click=move |_| {
                let yaml = for_copy.clone();
                spawn_local(async move {
                    status.set(Some(match copy(&yaml).await {
                        Ok(()) => "copied to the clipboard".to_owned(),
                        Err(_) => "this browser refused the clipboard: select the text and copy it".to_owned(),
                    }))
                });
            }>"Copy"</button>
            <pre class="yaml">{yaml}</pre>
        </section>
    }
}

/// Saves `contents` (a string or bytes) as the file `name`: a link to a Blob, clicked.
fn download(name: &str, contents: &JsValue, mime: &str) -> Result<(), JsValue> {
    let parts = js_sys::Array::of1(contents);
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or("no document")?;
    let link: web_sys::HtmlAnchorElement = document.create_element("a")?.dyn_into()?;
    link.set_href(&url);
    link.set_download(name);
    link.click();
    web_sys::Url::revoke_object_url(&url)
}

async fn copy(text: &str) -> Result<(), JsValue> {
    let clipboard = web_sys::window()
        .ok_or("no window")?
        .navigator()
        .clipboard();
    wasm_bindgen_futures::JsFuture::from(clipboard.write_text(text))
        .await
        .map(|_| ())
}
