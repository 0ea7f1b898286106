//! What the console's pages (`frontend/console/`, `frontend/plan/`) share: the one API client,
//! the chart and error widgets, the signed-in user, the planner's worker, and loading a script
//! the first time a page needs it.

pub mod api;
pub mod figure;
pub mod js;
pub mod planner;
pub mod ui;

use leptos::prelude::*;
use shared::accounts::Me;

/// The signed-in user, provided by the console's root.
pub fn use_me() -> RwSignal<Option<Me>> {
    expect_context::<RwSignal<Option<Me>>>()
}
