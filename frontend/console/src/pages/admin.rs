//! Admin: users (create, disable, roles, teams, password reset) and teams (namespace, cost
//! centre, members). Every change says where it happened whether it was saved, and an error
//! shows beside the row or field it is about; changes that lock someone out ask first.

use gloo_net::http::Method;
use leptos::{ev::SubmitEvent, html::Select, prelude::*};
use serde::{Serialize, de::DeserializeOwned};
use shared::{
    ApiError,
    accounts::{
        MIN_PASSWORD_CHARS, NewTeam, NewUser, PasswordReset, Role, Team, TeamPatch, User, UserPatch,
    },
    common::label::Labelled,
};

use crate::{api, ui::ErrorBox};

/// The last change made on the page: which row or form (`user-rita`, `new-team`), and what was
/// saved or why not. Kept above the tables, so it survives their reload.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    key: String,
    result: Result<String, ApiError>,
}

type Done = Callback<Outcome>;

#[component]
pub fn Admin() -> impl IntoView {
    let users = LocalResource::new(|| api::get::<Vec<User>>("/api/users"));
    let teams = LocalResource::new(|| api::get::<Vec<Team>>("/api/teams"));
    let last = RwSignal::new(None::<Outcome>);
    provide_context(last);
    let done = Callback::new(move |outcome: Outcome| {
        if outcome.result.is_ok() {
            users.refetch();
            teams.refetch();
        }
        last.set(Some(outcome));
    });
    let team_names = Signal::derive(move || {
        teams
            .get()
            .and_then(Result::ok)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.name)
            .collect::<Vec<_>>()
    });
    view! {
        <section>
            <h1>"Admin"</h1>
            <h2>"Users"</h2>
            {move || match users.get() {
                None => view! { <p class="muted">"loading…"</p> }.into_any(),
                Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
                Some(Ok(list)) => view! { <UserTable users=list team_names done/> }.into_any(),
            }}
            <NewUserForm team_names done/>
            <h2>"Teams"</h2>
            {move || match (teams.get(), users.get()) {
                (Some(Ok(list)), Some(Ok(people))) => {
                    let usernames = people.into_iter().map(|u| u.username).collect::<Vec<_>>();
                    view! { <TeamTable teams=list usernames done/> }.into_any()
                }
                (Some(Err(error)), _) => view! { <ErrorBox error/> }.into_any(),
                _ => view! { <p class="muted">"loading…"</p> }.into_any(),
            }}
            <NewTeamForm done/>
        </section>
    }
}

/// What happened to the row or form `key`: "saved" with what, or the error (all of it, when
/// `fields` is empty; otherwise only what [`FieldMessage`] does not show beside a field).
#[component]
fn Status(
    #[prop(into)] key: String,
    #[prop(optional)] fields: &'static [&'static str],
) -> impl IntoView {
    let last = expect_context::<RwSignal<Option<Outcome>>>();
    move || {
        last.get().filter(|o| o.key == key).map(|o| match o.result {
            Ok(what) => {
                view! { <span class="ok" data-test="saved">{format!("Saved: {what}.")}</span> }
                    .into_any()
            }
            Err(mut error) => {
                error.fields.retain(|f| !fields.contains(&f.path.as_str()));
                view! { <ErrorBox error/> }.into_any()
            }
        })
    }
}

/// The error of the last change to `key` about `field`, shown beside that field.
#[component]
fn FieldMessage(key: &'static str, field: &'static str) -> impl IntoView {
    let last = expect_context::<RwSignal<Option<Outcome>>>();
    move || {
        last.get()
            .filter(|o| o.key == key)
            .and_then(|o| o.result.err())
            .and_then(|e| e.fields.into_iter().find(|f| f.path == field))
            .map(|f| view! { <span class="error field" data-test=format!("error-{field}")>{f.message}</span> })
    }
}

/// A text input of the form `key`, with the last error about `field` beside it.
#[component]
fn TextField(
    key: &'static str,
    field: &'static str,
    #[prop(into)] placeholder: String,
    value: RwSignal<String>,
    #[prop(optional)] secret: bool,
) -> impl IntoView {
    view! {
        <span class="field">
            <input placeholder=placeholder type=if secret { "password" } else { "text" }
                autocomplete=if secret { "new-password" } else { "off" }
                prop:value=value on:input=move |ev| value.set(event_target_value(&ev))/>
            <FieldMessage key field/>
        </span>
    }
}

fn confirm(question: &str) -> bool {
    web_sys::window()
        .and_then(|w| w.confirm_with_message(question).ok())
        .unwrap_or(false)
}

fn patch_user(username: String, patch: UserPatch, what: String, done: Done) {
    leptos::task::spawn_local(async move {
        let path = format!("/api/users/{username}");
        let result = api::send::<_, User>(Method::PATCH, &path, Some(&patch))
            .await
            .map(|_| what);
        done.run(Outcome {
            key: format!("user-{username}"),
            result,
        });
    });
}

fn toggled<T: Clone + PartialEq>(list: &[T], item: &T, on: bool) -> Vec<T> {
    let mut out: Vec<T> = list.iter().filter(|x| *x != item).cloned().collect();
    if on {
        out.push(item.clone());
    }
    out
}

/// A box that gives `user` the `role` or takes it away.
fn role_box(user: &User, role: Role, done: Done) -> impl IntoView + use<> {
    let (name, roles) = (user.username.clone(), user.roles.clone());
    let checked = roles.contains(&role);
    view! {
        <label class="check">
            <input type="checkbox" prop:checked=checked on:change=move |ev| {
                let on = event_target_checked(&ev);
                let what = format!("{} {}", role.label(), if on { "added" } else { "removed" });
                let roles = toggled(&roles, &role, on);
                patch_user(name.clone(), UserPatch { roles: Some(roles), ..Default::default() }, what, done);
            }/>
            {role.label()}
        </label>
    }
}

#[component]
fn UserTable(users: Vec<User>, team_names: Signal<Vec<String>>, done: Done) -> impl IntoView {
    let rows = users
        .into_iter()
        .map(|user| {
            let role_boxes = Role::ALL
                .into_iter()
                .map(|role| role_box(&user, role, done))
                .collect_view();
            let (name, teams) = (user.username.clone(), user.teams.clone());
            let team_boxes = move || {
                team_names
                    .get()
                    .into_iter()
                    .map(|team| {
                        let (name, teams) = (name.clone(), teams.clone());
                        let checked = teams.contains(&team);
                        view! {
                            <label class="check">
                                <input type="checkbox" prop:checked=checked on:change={
                                    let team = team.clone();
                                    move |ev| {
                                        let on = event_target_checked(&ev);
                                        let what = format!("team {team} {}", if on { "added" } else { "removed" });
                                        let teams = toggled(&teams, &team, on);
                                        patch_user(name.clone(), UserPatch { teams: Some(teams), ..Default::default() }, what, done);
                                    }
                                }/>
                                {team}
                            </label>
                        }
                    })
                    .collect_view()
            };
            let (name, disabled) = (user.username.clone(), user.disabled);
            let toggle_disabled = move |_| {
                if !disabled && !confirm(&format!("Disable {name}? Their sessions end at once.")) {
                    return;
                }
                let what = if disabled { "enabled" } else { "disabled" }.to_owned();
                patch_user(name.clone(), UserPatch { disabled: Some(!disabled), ..Default::default() }, what, done);
            };
            let key = format!("user-{}", user.username);
            view! {
                <tr data-test=format!("user-{}", user.username)>
                    <td>{user.username.clone()}</td>
                    <td>{user.display_name.clone()}</td>
                    <td>{role_boxes}</td>
                    <td>{team_boxes}</td>
                    <td>
                        {if disabled { "disabled" } else { "active" }}
                        " "
                        <button class="link" on:click=toggle_disabled>{if disabled { "enable" } else { "disable" }}</button>
                        " "
                        <PasswordResetButton username=user.username.clone() done/>
                    </td>
                    <td><Status key/></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Username"</th><th>"Name"</th><th>"Roles"</th><th>"Teams"</th><th>"Status"</th><th></th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// Row `key` says what the page refused before asking the API.
fn refused(done: Done, key: String, message: &str) {
    done.run(Outcome {
        key,
        result: Err(ApiError::new(shared::ErrorCode::Invalid, message)),
    });
}

/// Sets a new password for a user (which ends their sessions), typed twice.
#[component]
fn PasswordResetButton(username: String, done: Done) -> impl IntoView {
    let open = RwSignal::new(false);
    let password = RwSignal::new(String::new());
    let again = RwSignal::new(String::new());
    let key = format!("user-{username}");
    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let key = key.clone();
        if password.get() != again.get() {
            refused(done, key, "the two passwords differ");
            return;
        }
        let path = format!("/api/users/{username}/password");
        let body = PasswordReset {
            password: password.get(),
        };
        leptos::task::spawn_local(async move {
            let result = api::send_no_content(Method::POST, &path, Some(&body))
                .await
                .map(|()| "new password set; their sessions ended".to_owned());
            if result.is_ok() {
                open.set(false);
            }
            done.run(Outcome { key, result });
        });
    };
    view! {
        <button class="link" data-test="reset-password" on:click=move |_| open.update(|o| *o = !*o)>"reset password"</button>
        <Show when=move || open.get()>
            <form class="inline" on:submit=submit.clone() data-test="password-form">
                <input type="password" autocomplete="new-password" placeholder=format!("new password ({MIN_PASSWORD_CHARS}+ characters)")
                    prop:value=password on:input=move |ev| password.set(event_target_value(&ev))/>
                <input type="password" autocomplete="new-password" placeholder="again"
                    prop:value=again on:input=move |ev| again.set(event_target_value(&ev))/>
                <button type="submit">"Set"</button>
            </form>
        </Show>
    }
}

/// Creates a user or a team (`POST path`): once it is saved, `clear` empties the form; either
/// way `done` hears what happened, under the form's `key`.
fn create<New, Created>(
    path: &'static str,
    key: &'static str,
    new: New,
    created: fn(Created) -> String,
    clear: impl FnOnce() + 'static,
    done: Done,
) where
    New: Serialize + 'static,
    Created: DeserializeOwned + 'static,
{
    leptos::task::spawn_local(async move {
        let result = api::send::<_, Created>(Method::POST, path, Some(&new))
            .await
            .map(created);
        if result.is_ok() {
            clear();
        }
        done.run(Outcome {
            key: key.to_owned(),
            result,
        });
    });
}

const NEW_USER_FIELDS: &[&str] = &["username", "display_name", "password", "roles", "teams"];

#[component]
fn NewUserForm(team_names: Signal<Vec<String>>, done: Done) -> impl IntoView {
    let username = RwSignal::new(String::new());
    let display_name = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let roles = RwSignal::new(Vec::<Role>::new());
    let teams = RwSignal::new(Vec::<String>::new());
    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let new = NewUser {
            username: username.get(),
            display_name: display_name.get(),
            password: password.get(),
            roles: roles.get(),
            teams: teams.get(),
        };
        let clear = move || {
            for field in [username, display_name, password] {
                field.set(String::new());
            }
            roles.set(Vec::new());
            teams.set(Vec::new());
        };
        let created = |user: User| format!("user {} created", user.username);
        create("/api/users", "new-user", new, created, clear, done);
    };
    view! {
        <form class="inline" on:submit=submit data-test="new-user">
            <TextField key="new-user" field="username" placeholder="username" value=username/>
            <TextField key="new-user" field="display_name" placeholder="display name" value=display_name/>
            <TextField key="new-user" field="password" placeholder=format!("password ({MIN_PASSWORD_CHARS}+ characters)")
                value=password secret=true/>
            <span class="field">
                {Role::ALL.into_iter().map(|role| view! {
                    <label class="check" title=role.description()>
                        <input type="checkbox" prop:checked=move || roles.with(|r| r.contains(&role))
                            on:change=move |ev| roles.update(|r| *r = toggled(r, &role, event_target_checked(&ev)))/>
                        {role.label()}
                    </label>
                }).collect_view()}
                <FieldMessage key="new-user" field="roles"/>
            </span>
            <span class="field">
                {move || team_names.get().into_iter().map(|team| {
                    let name = team.clone();
                    view! {
                        <label class="check">
                            <input type="checkbox" prop:checked={ let name = name.clone(); move || teams.with(|t| t.contains(&name)) }
                                on:change=move |ev| teams.update(|t| *t = toggled(t, &name, event_target_checked(&ev)))/>
                            {team}
                        </label>
                    }
                }).collect_view()}
                <FieldMessage key="new-user" field="teams"/>
            </span>
            <button type="submit">"Create user"</button>
            <Status key="new-user" fields=NEW_USER_FIELDS/>
        </form>
    }
}

/// Adds the member chosen in `select` to `team_name` (read from the element when clicked, so
/// what is shown is what is added, even after the list reloads).
fn add_member(
    team_name: String,
    row: String,
    select: NodeRef<Select>,
    done: Done,
) -> impl Fn(leptos::ev::MouseEvent) + Clone + 'static {
    move |_| {
        let who = select.get().map(|s| s.value()).unwrap_or_default();
        let key = row.clone();
        if who.is_empty() {
            refused(done, key, "choose a member to add");
            return;
        }
        let path = format!("/api/teams/{team_name}/members/{who}");
        leptos::task::spawn_local(async move {
            let result = api::send_no_content::<()>(Method::PUT, &path, None)
                .await
                .map(|()| format!("{who} added"));
            if result.is_ok()
                && let Some(select) = select.get_untracked()
            {
                select.set_value("");
            }
            done.run(Outcome { key, result });
        });
    }
}

/// A member of `team` with the button that removes them (asked first).
fn member_chip(team: &str, member: &str, key: &str, done: Done) -> impl IntoView + use<> {
    let path = format!("/api/teams/{team}/members/{member}");
    let (member, team_name, key) = (member.to_owned(), team.to_owned(), key.to_owned());
    view! {
        <span class="chip">{member.clone()}
            <button class="link" title="remove" on:click=move |_| {
                if !confirm(&format!("Remove {member} from {team_name}?")) {
                    return;
                }
                let (path, key, what) = (path.clone(), key.clone(), format!("{member} removed"));
                leptos::task::spawn_local(async move {
                    let result = api::send_no_content::<()>(Method::DELETE, &path, None).await.map(|()| what);
                    done.run(Outcome { key, result });
                });
            }>"×"</button>
        </span>
    }
}

#[component]
fn TeamTable(teams: Vec<Team>, usernames: Vec<String>, done: Done) -> impl IntoView {
    let rows = teams
        .into_iter()
        .map(|team| {
            let key = format!("team-{}", team.name);
            let namespace = RwSignal::new(team.namespace.clone());
            let cost_centre = RwSignal::new(team.cost_centre.clone());
            let (name, row) = (team.name.clone(), key.clone());
            let save = move |_| {
                let patch = TeamPatch { namespace: Some(namespace.get()), cost_centre: Some(cost_centre.get()) };
                let (path, key) = (format!("/api/teams/{name}"), row.clone());
                leptos::task::spawn_local(async move {
                    let result = api::send::<_, Team>(Method::PATCH, &path, Some(&patch))
                        .await
                        .map(|_| "namespace and cost centre".to_owned());
                    done.run(Outcome { key, result });
                });
            };
            let members = team
                .members
                .iter()
                .map(|member| member_chip(&team.name, member, &key, done))
                .collect_view();
            let options = usernames
                .iter()
                .filter(|u| !team.members.contains(u))
                .map(|u| view! { <option value=u.clone()>{u.clone()}</option> })
                .collect_view();
            let select = NodeRef::<Select>::new();
            let add = add_member(team.name.clone(), key.clone(), select, done);
            view! {
                <tr data-test=format!("team-{}", team.name)>
                    <td>{team.name.clone()}</td>
                    <td><input prop:value=namespace on:input=move |ev| namespace.set(event_target_value(&ev))/></td>
                    <td><input prop:value=cost_centre on:input=move |ev| cost_centre.set(event_target_value(&ev))/></td>
                    <td><button on:click=save>"Save"</button></td>
                    <td>
                        {members}
                        <select node_ref=select data-test="member-choice">
                            <option value="">"add member…"</option>
                            {options}
                        </select>
                        <button on:click=add data-test="add-member">"Add"</button>
                    </td>
                    <td><Status key/></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Team"</th><th>"Namespace"</th><th>"Cost centre"</th><th></th><th>"Members"</th><th></th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

const NEW_TEAM_FIELDS: &[&str] = &["name", "namespace", "cost_centre"];

#[component]
fn NewTeamForm(done: Done) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let namespace = RwSignal::new(String::new());
    let cost_centre = RwSignal::new(String::new());
    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let new = NewTeam {
            name: name.get(),
            namespace: namespace.get(),
            cost_centre: cost_centre.get(),
        };
        let clear = move || {
            for field in [name, namespace, cost_centre] {
                field.set(String::new());
            }
        };
        let created = |team: Team| format!("team {} created", team.name);
        create("/api/teams", "new-team", new, created, clear, done);
    };
    view! {
        <form class="inline" on:submit=submit data-test="new-team">
            <TextField key="new-team" field="name" placeholder="team name" value=name/>
            <TextField key="new-team" field="namespace" placeholder="namespace" value=namespace/>
            <TextField key="new-team" field="cost_centre" placeholder="cost centre" value=cost_centre/>
            <button type="submit">"Create team"</button>
            <Status key="new-team" fields=NEW_TEAM_FIELDS/>
        </form>
    }
}
