//! Accounts: roles, teams, the signed-in user, and which console pages each role may use.
//!
//! Invariants: a user holds any set of roles; team membership is a relation (a user may be in
//! several teams); a team has one Kubernetes namespace and one cost centre.

use serde::{Deserialize, Serialize};

use crate::{
    common::error::FieldError, common::label::Labelled, common::validate::validate_dns_label,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A team member who requests GPU quota for the teams they belong to.
    Requester,
    /// A platform manager who approves quota and plans the fleet.
    Approver,
    /// Reads all chargeback.
    Finance,
    /// Manages users, teams, flavors and settings.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Requester, Role::Approver, Role::Finance, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Requester => "requester",
            Role::Approver => "approver",
            Role::Finance => "finance",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl Labelled for Role {
    fn label(self) -> &'static str {
        match self {
            Role::Requester => "Requester",
            Role::Approver => "Approver",
            Role::Finance => "Finance",
            Role::Admin => "Admin",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Role::Requester => "Requests GPU quota for their teams.",
            Role::Approver => "Plans the fleet and approves quota.",
            Role::Finance => "Reads all chargeback.",
            Role::Admin => "Manages users, teams and settings.",
        }
    }
}

/// A team as everyone who may see it sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub name: String,
    pub namespace: String,
    pub cost_centre: String,
    /// Usernames, sorted.
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTeam {
    pub name: String,
    pub namespace: String,
    pub cost_centre: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamPatch {
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub cost_centre: Option<String>,
}

/// `GET /api/auth/me`: who is signed in, and the token to send back as `X-CSRF-Token` on every
/// state-changing request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub display_name: String,
    pub roles: Vec<Role>,
    pub teams: Vec<String>,
    pub csrf_token: String,
}

/// Every error of a request body, or `Ok` when there is none.
fn all_or_nothing(errors: Vec<FieldError>) -> Result<(), Vec<FieldError>> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

impl NewUser {
    /// The field rules of a new user (teams must also exist: the server checks that).
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        validate_username("username", &self.username, &mut errors);
        validate_password("password", &self.password, &mut errors);
        validate_display_name("display_name", &self.display_name, &mut errors);
        validate_roles("roles", &self.roles, &mut errors);
        all_or_nothing(errors)
    }
}

impl UserPatch {
    /// The rules of the fields it changes.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Some(name) = &self.display_name {
            validate_display_name("display_name", name, &mut errors);
        }
        if let Some(roles) = &self.roles {
            validate_roles("roles", roles, &mut errors);
        }
        all_or_nothing(errors)
    }
}

impl PasswordReset {
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        validate_password("password", &self.password, &mut errors);
        all_or_nothing(errors)
    }
}

impl NewTeam {
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        validate_dns_label("name", &self.name, &mut errors);
        validate_dns_label("namespace", &self.namespace, &mut errors);
        validate_cost_centre("cost_centre", &self.cost_centre, &mut errors);
        all_or_nothing(errors)
    }
}

impl TeamPatch {
    /// The rules of the fields it changes.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Some(namespace) = &self.namespace {
            validate_dns_label("namespace", namespace, &mut errors);
        }
        if let Some(cost_centre) = &self.cost_centre {
            validate_cost_centre("cost_centre", cost_centre, &mut errors);
        }
        all_or_nothing(errors)
    }
}

impl LoginRequest {
    /// Length limits, checked before any database work or hashing. The username's characters
    /// are not checked here: a wrong one is just a wrong username.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.username.chars().count() > MAX_USERNAME_CHARS {
            errors.push(FieldError {
                path: "username".to_owned(),
                message: format!("must be at most {MAX_USERNAME_CHARS} characters"),
            });
        }
        if self.password.len() > MAX_PASSWORD_BYTES {
            errors.push(FieldError {
                path: "password".to_owned(),
                message: format!("must be at most {MAX_PASSWORD_BYTES} bytes"),
            });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

impl Me {
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Whether the quota API lets them draft a request for `team`: its members and admins
    /// (`POST /api/quota/teams/{team}/requests`), whatever other roles they hold.
    pub fn may_draft_for(&self, team: &str) -> bool {
        self.has(Role::Admin) || self.teams.iter().any(|t| t == team)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

/// A user as an admin sees it. Never carries a password or its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub username: String,
    pub display_name: String,
    pub roles: Vec<Role>,
    pub teams: Vec<String>,
    pub disabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewUser {
    pub username: String,
    #[serde(default)]
    pub display_name: String,
    pub password: String,
    #[serde(default)]
    pub roles: Vec<Role>,
    #[serde(default)]
    pub teams: Vec<String>,
}

/// Changes to a user; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPatch {
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub disabled: Option<bool>,
    #[serde(default)]
    pub roles: Option<Vec<Role>>,
    #[serde(default)]
    pub teams: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordReset {
    pub password: String,
}

/// Shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password accepted (hashing a longer one only costs the server time).
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// Longest username (the database checks the same).
pub const MAX_USERNAME_CHARS: usize = 64;
/// Longest display name (the database checks the same).
pub const MAX_DISPLAY_NAME_CHARS: usize = 200;

/// The roles that plan the fleet: the Plan page and the planning API.
pub const PLANNERS: &[Role] = &[Role::Approver, Role::Admin];

/// A user holds at least one role: one with none could open nothing but the fleet page.
pub fn validate_roles(path: &str, roles: &[Role], errors: &mut Vec<FieldError>) {
    if roles.is_empty() {
        errors.push(FieldError {
            path: path.to_owned(),
            message: "give at least one role".to_owned(),
        });
    }
}

pub fn validate_display_name(path: &str, name: &str, errors: &mut Vec<FieldError>) {
    crate::common::validate::validate_visible(path, name, errors);
    if name.chars().count() > MAX_DISPLAY_NAME_CHARS {
        errors.push(FieldError {
            path: path.to_owned(),
            message: format!("must be at most {MAX_DISPLAY_NAME_CHARS} characters"),
        });
    }
}

/// Usernames: lower-case letters, digits and `._@-`, 1 to [`MAX_USERNAME_CHARS`] characters,
/// starting with a letter or digit (what the database checks too).
pub fn validate_username(path: &str, username: &str, errors: &mut Vec<FieldError>) {
    let ok = !username.is_empty()
        && username.len() <= MAX_USERNAME_CHARS
        && username.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && username
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._@-".contains(c));
    if !ok {
        errors.push(FieldError {
            path: path.to_owned(),
            message:
                "use 1-64 lower-case letters, digits or . _ @ -, starting with a letter or digit"
                    .to_owned(),
        });
    }
}

pub fn validate_password(path: &str, password: &str, errors: &mut Vec<FieldError>) {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        errors.push(FieldError {
            path: path.to_owned(),
            message: format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        });
    }
    if password.len() > MAX_PASSWORD_BYTES {
        errors.push(FieldError {
            path: path.to_owned(),
            message: format!("must be at most {MAX_PASSWORD_BYTES} bytes"),
        });
    }
}

pub fn validate_cost_centre(path: &str, value: &str, errors: &mut Vec<FieldError>) {
    crate::common::validate::validate_visible(path, value, errors);
    if value.trim().is_empty() || value.len() > 64 {
        errors.push(FieldError {
            path: path.to_owned(),
            message: "must be 1-64 characters".to_owned(),
        });
    }
}

/// The console's pages, and who sees each in the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Plan,
    Quotas,
    Cluster,
    Chargeback,
    Fleet,
    Admin,
}

impl Page {
    pub const ALL: [Page; 6] = [
        Page::Plan,
        Page::Quotas,
        Page::Cluster,
        Page::Chargeback,
        Page::Fleet,
        Page::Admin,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Page::Plan => "Plan",
            Page::Quotas => "Quotas",
            Page::Cluster => "Cluster",
            Page::Chargeback => "Chargeback",
            Page::Fleet => "Fleet",
            Page::Admin => "Admin",
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Page::Plan => "/plan",
            Page::Quotas => "/quotas",
            Page::Cluster => "/cluster",
            Page::Chargeback => "/chargeback",
            Page::Fleet => "/fleet",
            Page::Admin => "/admin",
        }
    }

    /// One line for the home page's card.
    pub fn summary(self) -> &'static str {
        match self {
            Page::Plan => "size the fleet and choose an architecture.",
            Page::Quotas => "request and approve GPU quota.",
            Page::Cluster => "approved quota on the cluster: applied, drift, conflicts.",
            Page::Chargeback => "cost by allocation and by use.",
            Page::Fleet => "the accelerators you have.",
            Page::Admin => "users, teams and settings.",
        }
    }

    /// Where a user lands after log-in: the page of their most specific role, so nobody lands
    /// on a page the previous user of the browser could open and they cannot.
    pub fn home_for(roles: &[Role]) -> Page {
        [
            (Role::Admin, Page::Admin),
            (Role::Approver, Page::Plan),
            (Role::Finance, Page::Chargeback),
            (Role::Requester, Page::Quotas),
        ]
        .into_iter()
        .find(|(role, _)| roles.contains(role))
        .map_or(Page::Fleet, |(_, page)| page)
    }

    /// Roles that may use the page; an empty list means every signed-in user.
    pub fn roles(self) -> &'static [Role] {
        match self {
            Page::Plan => PLANNERS,
            Page::Quotas => &[Role::Requester, Role::Approver, Role::Finance, Role::Admin],
            // a requester sees their own teams' figures there (the API answers only those)
            Page::Chargeback => &[Role::Requester, Role::Finance, Role::Approver, Role::Admin],
            Page::Cluster | Page::Fleet => &[],
            Page::Admin => &[Role::Admin],
        }
    }

    pub fn visible_to(self, roles: &[Role]) -> bool {
        let allowed = self.roles();
        allowed.is_empty() || allowed.iter().any(|r| roles.contains(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn navigation_per_role() {
        let visible = |roles: &[Role]| -> Vec<&str> {
            Page::ALL
                .into_iter()
                .filter(|p| p.visible_to(roles))
                .map(Page::title)
                .collect()
        };
        assert_eq!(
            visible(&[Role::Requester]),
            ["Quotas", "Cluster", "Chargeback", "Fleet"]
        );
        assert_eq!(
            visible(&[Role::Approver]),
            ["Plan", "Quotas", "Cluster", "Chargeback", "Fleet"]
        );
        assert_eq!(
            visible(&[Role::Finance]),
            ["Quotas", "Cluster", "Chargeback", "Fleet"]
        );
        assert_eq!(
            visible(&[Role::Admin]),
            ["Plan", "Quotas", "Cluster", "Chargeback", "Fleet", "Admin"]
        );
        assert_eq!(
            visible(&[Role::Requester, Role::Finance]),
            ["Quotas", "Cluster", "Chargeback", "Fleet"]
        );
        assert_eq!(visible(&[]), ["Cluster", "Fleet"]);
    }

    #[test]
    fn members_and_admins_draft_for_a_team_approvers_do_not() {
        let me = |roles: &[Role], teams: &[&str]| Me {
            username: "u".into(),
            display_name: String::new(),
            roles: roles.to_vec(),
            teams: teams.iter().map(|t| (*t).to_owned()).collect(),
            csrf_token: String::new(),
        };
        assert!(me(&[Role::Requester], &["research"]).may_draft_for("research"));
        assert!(!me(&[Role::Requester], &["research"]).may_draft_for("search"));
        assert!(!me(&[Role::Approver], &[]).may_draft_for("research"));
        assert!(me(&[Role::Approver], &["search"]).may_draft_for("search"));
        assert!(me(&[Role::Admin], &[]).may_draft_for("research"));
    }

    #[test]
    fn each_role_lands_on_a_page_it_may_open() {
        assert_eq!(Page::home_for(&[Role::Requester]), Page::Quotas);
        assert_eq!(Page::home_for(&[Role::Finance]), Page::Chargeback);
        assert_eq!(Page::home_for(&[Role::Approver]), Page::Plan);
        assert_eq!(Page::home_for(&[Role::Requester, Role::Admin]), Page::Admin);
        assert_eq!(Page::home_for(&[]), Page::Fleet);
        for roles in [
            &[Role::Requester][..],
            &[Role::Finance],
            &[Role::Approver],
            &[Role::Admin],
            &[],
        ] {
            assert!(Page::home_for(roles).visible_to(roles), "{roles:?}");
        }
    }

    #[test]
    fn field_rules() {
        let check = |f: fn(&str, &str, &mut Vec<FieldError>), v: &str| {
            let mut errors = Vec::new();
            f("x", v, &mut errors);
            errors.is_empty()
        };
        for ok in ["alice", "a", "bob.smith@corp", "x-1_2"] {
            assert!(check(validate_username, ok), "{ok}");
        }
        for bad in ["", "Alice", "-a", "a b", &"a".repeat(65)] {
            assert!(!check(validate_username, bad), "{bad}");
        }
        assert!(check(validate_password, "correct horse"));
        assert!(!check(validate_password, "short"));
        assert!(!check(validate_cost_centre, " "));
        assert!(check(validate_cost_centre, "CC-1001"));
    }

    #[test]
    fn roles_round_trip() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
