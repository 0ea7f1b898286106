//! Admin: users (create, disable, roles, teams) and teams (namespace, cost centre, members).

use gloo_net::http::Method;
use leptos::{ev::SubmitEvent, prelude::*};
use shared::{
    ApiError,
    auth::{MIN_PASSWORD_CHARS, NewTeam, NewUser, Role, Team, TeamPatch, User, UserPatch},
    label::Labelled,
};

use crate::{api, ui::ErrorBox};

#[component]
pub fn Admin() -> impl IntoView {
    let users = LocalResource::new(|| api::get::<Vec<User>>("/api/users"));
    let teams = LocalResource::new(|| api::get::<Vec<Team>>("/api/teams"));
    let error = RwSignal::new(None::<ApiError>);
    // Every change goes through here: report the error, or reload both lists.
    let done = move |result: Result<(), ApiError>| match result {
        Ok(()) => {
            error.set(None);
            users.refetch();
            teams.refetch();
        }
        Err(err) => error.set(Some(err)),
    };
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
            {move || error.get().map(|error| view! { <ErrorBox error/> })}
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

type Done = Callback<Result<(), ApiError>>;

fn patch_user(username: String, patch: UserPatch, done: impl Fn(Result<(), ApiError>) + 'static) {
    leptos::task::spawn_local(async move {
        let path = format!("/api/users/{username}");
        done(
            api::send::<_, User>(Method::PATCH, &path, Some(&patch))
                .await
                .map(|_| ()),
        );
    });
}

fn toggled<T: Clone + PartialEq>(list: &[T], item: &T, on: bool) -> Vec<T> {
    let mut out: Vec<T> = list.iter().filter(|x| *x != item).cloned().collect();
    if on {
        out.push(item.clone());
    }
    out
}

#[component]
fn UserTable(
    users: Vec<User>,
    team_names: Signal<Vec<String>>,
    #[prop(into)] done: Done,
) -> impl IntoView {
    let rows = users
        .into_iter()
        .map(|user| {
            let role_boxes = Role::ALL
                .into_iter()
                .map(|role| {
                    let (name, roles) = (user.username.clone(), user.roles.clone());
                    let checked = roles.contains(&role);
                    view! {
                        <label class="check">
                            <input type="checkbox" prop:checked=checked on:change=move |ev| {
                                let roles = toggled(&roles, &role, event_target_checked(&ev));
                                patch_user(name.clone(), UserPatch { roles: Some(roles), ..Default::default() }, move |r| done.run(r));
                            }/>
                            {role.label()}
                        </label>
                    }
                })
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
                                        let teams = toggled(&teams, &team, event_target_checked(&ev));
                                        patch_user(name.clone(), UserPatch { teams: Some(teams), ..Default::default() }, move |r| done.run(r));
                                    }
                                }/>
                                {team}
                            </label>
                        }
                    })
                    .collect_view()
            };
            let (name, disabled) = (user.username.clone(), user.disabled);
            view! {
                <tr data-test=format!("user-{}", user.username)>
                    <td>{user.username.clone()}</td>
                    <td>{user.display_name.clone()}</td>
                    <td>{role_boxes}</td>
                    <td>{team_boxes}</td>
                    <td>
                        {if disabled { "disabled" } else { "active" }}
                        " "
                        <button class="link" on:click=move |_| {
                            patch_user(name.clone(), UserPatch { disabled: Some(!disabled), ..Default::default() }, move |r| done.run(r));
                        }>{if disabled { "enable" } else { "disable" }}</button>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Username"</th><th>"Name"</th><th>"Roles"</th><th>"Teams"</th><th>"Status"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
fn NewUserForm(team_names: Signal<Vec<String>>, #[prop(into)] done: Done) -> impl IntoView {
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
        leptos::task::spawn_local(async move {
            let result = api::send::<_, User>(Method::POST, "/api/users", Some(&new))
                .await
                .map(|_| ());
            if result.is_ok() {
                for field in [username, display_name, password] {
                    field.set(String::new());
                }
                roles.set(Vec::new());
                teams.set(Vec::new());
            }
            done.run(result);
        });
    };
    view! {
        <form class="inline" on:submit=submit data-test="new-user">
            <input placeholder="username" prop:value=username on:input=move |ev| username.set(event_target_value(&ev))/>
            <input placeholder="display name" prop:value=display_name on:input=move |ev| display_name.set(event_target_value(&ev))/>
            <input placeholder=format!("password ({MIN_PASSWORD_CHARS}+ characters)") type="password" autocomplete="new-password"
                prop:value=password on:input=move |ev| password.set(event_target_value(&ev))/>
            {Role::ALL.into_iter().map(|role| view! {
                <label class="check">
                    <input type="checkbox" prop:checked=move || roles.with(|r| r.contains(&role))
                        on:change=move |ev| roles.update(|r| *r = toggled(r, &role, event_target_checked(&ev)))/>
                    {role.label()}
                </label>
            }).collect_view()}
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
            <button type="submit">"Create user"</button>
        </form>
    }
}

#[component]
fn TeamTable(teams: Vec<Team>, usernames: Vec<String>, #[prop(into)] done: Done) -> impl IntoView {
    let rows = teams
        .into_iter()
        .map(|team| {
            let namespace = RwSignal::new(team.namespace.clone());
            let cost_centre = RwSignal::new(team.cost_centre.clone());
            let name = team.name.clone();
            let save = move |_| {
                let patch = TeamPatch { namespace: Some(namespace.get()), cost_centre: Some(cost_centre.get()) };
                let path = format!("/api/teams/{name}");
                leptos::task::spawn_local(async move {
                    done.run(api::send::<_, Team>(Method::PATCH, &path, Some(&patch)).await.map(|_| ()));
                });
            };
            let members = team
                .members
                .iter()
                .map(|member| {
                    let path = format!("/api/teams/{}/members/{member}", team.name);
                    view! {
                        <span class="chip">{member.clone()}
                            <button class="link" title="remove" on:click=move |_| {
                                let path = path.clone();
                                leptos::task::spawn_local(async move {
                                    done.run(api::send_no_content::<()>(Method::DELETE, &path, None).await);
                                });
                            }>"×"</button>
                        </span>
                    }
                })
                .collect_view();
            let candidate = RwSignal::new(String::new());
            let options = usernames
                .iter()
                .filter(|u| !team.members.contains(u))
                .map(|u| view! { <option value=u.clone()>{u.clone()}</option> })
                .collect_view();
            let team_name = team.name.clone();
            let add = move |_| {
                let who = candidate.get();
                if who.is_empty() {
                    return;
                }
                let path = format!("/api/teams/{team_name}/members/{who}");
                leptos::task::spawn_local(async move {
                    done.run(api::send_no_content::<()>(Method::PUT, &path, None).await);
                });
            };
            view! {
                <tr data-test=format!("team-{}", team.name)>
                    <td>{team.name.clone()}</td>
                    <td><input prop:value=namespace on:input=move |ev| namespace.set(event_target_value(&ev))/></td>
                    <td><input prop:value=cost_centre on:input=move |ev| cost_centre.set(event_target_value(&ev))/></td>
                    <td><button on:click=save>"Save"</button></td>
                    <td>
                        {members}
                        <select on:change=move |ev| candidate.set(event_target_value(&ev))>
                            <option value="">"add member…"</option>
                            {options}
                        </select>
                        <button on:click=add>"Add"</button>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Team"</th><th>"Namespace"</th><th>"Cost centre"</th><th></th><th>"Members"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
fn NewTeamForm(#[prop(into)] done: Done) -> impl IntoView {
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
        leptos::task::spawn_local(async move {
            let result = api::send::<_, Team>(Method::POST, "/api/teams", Some(&new))
                .await
                .map(|_| ());
            if result.is_ok() {
                for field in [name, namespace, cost_centre] {
                    field.set(String::new());
                }
            }
            done.run(result);
        });
    };
    view! {
        <form class="inline" on:submit=submit data-test="new-team">
            <input placeholder="team name" prop:value=name on:input=move |ev| name.set(event_target_value(&ev))/>
            <input placeholder="namespace" prop:value=namespace on:input=move |ev| namespace.set(event_target_value(&ev))/>
            <input placeholder="cost centre" prop:value=cost_centre on:input=move |ev| cost_centre.set(event_target_value(&ev))/>
            <button type="submit">"Create team"</button>
        </form>
    }
}
