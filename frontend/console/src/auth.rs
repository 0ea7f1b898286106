//! Log-in and log-out.

use gloo_net::http::Method;
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_router::hooks::use_navigate;
use shared::{
    ApiError,
    accounts::{LoginRequest, Me, Page},
};

use crate::{api, ui::ErrorBox};

pub use gpufleet_web::use_me;

#[component]
pub fn Login() -> impl IntoView {
    let me = use_me();
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let error = RwSignal::new(None::<ApiError>);
    let navigate = use_navigate();
    let login = Action::new_local(move |request: &LoginRequest| {
        let request = request.clone();
        let navigate = navigate.clone();
        async move {
            match api::send::<_, Me>(Method::POST, "/api/auth/login", Some(&request)).await {
                Ok(user) => {
                    error.set(None);
                    // Each user starts on their own role's page, not where the last one left.
                    navigate(Page::home_for(&user.roles).path(), Default::default());
                    me.set(Some(user));
                }
                Err(err) => error.set(Some(err)),
            }
        }
    });
    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        login.dispatch(LoginRequest {
            username: username.get(),
            password: password.get(),
        });
        password.set(String::new());
    };
    view! {
        <main class="login">
            <h1>"gpufleet"</h1>
            <form on:submit=submit data-test="login-form">
                <label>"Username"
                    <input name="username" autocomplete="username" required
                        prop:value=username on:input=move |ev| username.set(event_target_value(&ev))/>
                </label>
                <label>"Password"
                    <input name="password" type="password" autocomplete="current-password" required
                        prop:value=password on:input=move |ev| password.set(event_target_value(&ev))/>
                </label>
                <button type="submit" disabled=move || login.pending().get()>"Log in"</button>
            </form>
            {move || error.get().map(|error| view! { <ErrorBox error/> })}
        </main>
    }
}

#[component]
pub fn LogoutButton() -> impl IntoView {
    let me = use_me();
    let failed = RwSignal::new(None::<String>);
    let navigate = use_navigate();
    let logout = Action::new_local(move |_: &()| {
        let navigate = navigate.clone();
        async move {
            match api::send_no_content::<()>(Method::POST, "/api/auth/logout", None).await {
                Ok(()) => {
                    navigate("/", Default::default());
                    me.set(None);
                }
                // The session may still be alive on the server: say so rather than pretend.
                Err(err) => failed.set(Some(format!("log-out failed: {}", err.message))),
            }
        }
    });
    view! {
        <button class="link" data-test="logout" on:click=move |_| { logout.dispatch(()); }>"Log out"</button>
        {move || failed.get().map(|text| view! { <span class="bad">{text}</span> })}
    }
}
