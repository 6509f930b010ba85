//! The OpenAPI 3.1 document, generated from the handlers' own types and served at
//! `/openapi.json`; `openapi/openapi.json` is the committed copy (a test keeps them equal).

use serde::Serialize;
use serde_json::Value;
use utoipa::{OpenApi, ToSchema};

use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::session::Session;

/// The error body of every non-2xx response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    #[schema(value_type = String, example = "error")]
    pub tag: String,
    pub error: ErrorDetail,
    pub request_id: String,
}

/// `error` inside [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    /// Present exactly when the error has a stable `error_code` (e.g. `unknown_field` with
    /// `field` and `suggestion`, `unsupported_feature` with `field` and `feature`,
    /// `invalid_metadata`, `environment_archived`); absent otherwise.
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

/// A page of agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentPage {
    pub data: Vec<Agent>,
    pub next_page: Option<String>,
}

/// A page of memory stores.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryStorePage {
    pub data: Vec<mast_domain::memory::MemoryStore>,
    pub next_page: Option<String>,
}

/// A page of memory versions.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryVersionPage {
    pub data: Vec<mast_domain::memory::MemoryVersion>,
    pub next_page: Option<String>,
}

/// A page of vaults.
#[derive(Debug, Serialize, ToSchema)]
pub struct VaultPage {
    pub data: Vec<mast_domain::vault::Vault>,
    pub next_page: Option<String>,
}

/// A page of vault credentials (never their secrets).
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialPage {
    pub data: Vec<mast_domain::credential::Credential>,
    pub next_page: Option<String>,
}

/// A page of session threads.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadPage {
    pub data: Vec<mast_domain::thread::SessionThread>,
    pub next_page: Option<String>,
}

/// A page of work items.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkPage {
    pub data: Vec<mast_domain::work::Work>,
    pub next_page: Option<String>,
}

/// An environment's keys (never the keys themselves).
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentKeyPage {
    pub data: Vec<mast_domain::work::EnvironmentKey>,
    pub next_page: Option<String>,
}

/// A page of environments.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentPage {
    pub data: Vec<Environment>,
    pub next_page: Option<String>,
}

/// A page of sessions (bidirectional).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionPage {
    pub data: Vec<Session>,
    pub next_page: Option<String>,
    pub prev_page: Option<String>,
}

/// A page of session events.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Value>,
    pub next_page: Option<String>,
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Mast", description = "A self-hostable server for the Claude Managed Agents API (beta managed-agents-2026-04-01)."),
    paths(
        super::agents::create, super::agents::list, super::agents::retrieve, super::agents::update,
        super::agents::archive, super::agents::versions,
        super::environments::create, super::environments::list, super::environments::retrieve,
        super::environments::update, super::environments::archive, super::environments::delete,
        super::sessions::create, super::sessions::list, super::sessions::retrieve, super::sessions::update,
        super::sessions::archive, super::sessions::delete,
        super::events::send, super::events::list, super::stream::stream,
        super::models::list, super::models::retrieve,
        super::environment_keys::create, super::environment_keys::list, super::environment_keys::revoke,
        super::work::poll, super::work::ack, super::work::heartbeat, super::work::stop, super::work::list,
        super::work::retrieve, super::work::update, super::work::stats,
        super::threads::list, super::threads::retrieve, super::threads::archive, super::threads::events,
        super::threads::stream, super::threads::transcript,
        super::vaults::create, super::vaults::list, super::vaults::retrieve, super::vaults::update,
        super::vaults::archive, super::vaults::delete, super::vaults::credential_create,
        super::vaults::credential_list, super::vaults::credential_retrieve,
        super::vaults::credential_update, super::vaults::credential_archive,
        super::vaults::credential_delete, super::vaults::credential_validate,
        super::files::upload, super::files::list, super::files::retrieve, super::files::download,
        super::files::delete,
        super::memory_stores::create, super::memory_stores::list, super::memory_stores::retrieve,
        super::memory_stores::update, super::memory_stores::archive, super::memory_stores::delete,
        super::memories::create, super::memories::list, super::memories::retrieve,
        super::memories::update, super::memories::delete, super::memories::versions,
        super::memories::version, super::memories::redact,
        super::resources::add, super::resources::list, super::resources::retrieve,
        super::resources::update, super::resources::delete,
        super::skills::create, super::skills::list, super::skills::retrieve, super::skills::delete,
        super::skills::create_version, super::skills::list_versions, super::skills::retrieve_version,
        super::skills::delete_version, super::skills::download,
        // Hooks: Mast's own addition.
        super::hooks::create, super::hooks::list, super::hooks::retrieve, super::hooks::delete,
        // Mast's own additions beyond the upstream API.
        super::fork::fork,
        // Webhooks (Mast's own, /v1/mast/webhook_endpoints).
        super::webhooks::create, super::webhooks::list, super::webhooks::retrieve,
        super::webhooks::update, super::webhooks::delete, super::webhooks::rotate_secret,
        super::webhooks::deliveries, super::webhooks::delivery, super::webhooks::attempts,
        super::webhooks::replay,
        super::deployments::create, super::deployments::list, super::deployments::retrieve,
        super::deployments::update, super::deployments::archive, super::deployments::pause,
        super::deployments::unpause, super::deployments::run, super::deployments::runs_list,
        super::deployments::runs_retrieve,
    ),
    components(schemas(ErrorBody, ErrorDetail, AgentPage, EnvironmentPage, SessionPage, EventPage, WorkPage,
        EnvironmentKeyPage, ThreadPage, VaultPage, CredentialPage, super::files::FilePage,
        super::files::FileUpload, super::files::FileBytes, MemoryStorePage, MemoryVersionPage,
        super::resources::ResourcePage, super::resources::ResourceAdd, super::resources::ResourceUpdate,
        super::skills::SkillPage, super::skills::SkillVersionPage, super::skills::SkillUpload,
        super::skills::SkillArchive,
        super::resources::SessionResource,
        // Hooks: Mast's own addition.
        super::hooks::HookPage, super::hooks::HookDeleted,
        // Webhooks.
        super::webhooks::WebhookEndpointPage, super::webhooks::WebhookDeliveryPage,
        super::webhooks::WebhookAttemptList,
        // Deployments.
        super::deployments::DeploymentPage, super::deployments::DeploymentRunPage)),
    modifiers(&Security, &ErrorResponses, &ParameterDocs),
    security(("api_key" = []), ("bearer" = [])),
)]
struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Documents the error answers every operation can give, so each operation's annotation lists
/// only its own: 400 for bad input (query, body, a NUL in the URL), 401 without a valid
/// credential, 403 for a credential of the wrong kind or workspace, 404 when a path names
/// something that does not exist, 413 for a body over the size limit.
struct ErrorResponses;

impl utoipa::Modify for ErrorResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder, Schema};
        let error = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        // Schemas whose every property is optional: a body of that kind may be left out, since
        // an empty body reads as `{}` (action endpoints get `Content-Length: 0`).
        let all_optional: Vec<String> = openapi
            .components
            .iter()
            .flat_map(|c| &c.schemas)
            .filter_map(|(name, schema)| match schema {
                RefOr::T(Schema::Object(o)) if o.required.is_empty() => Some(name.clone()),
                _ => None,
            })
            .collect();
        for op in operations(openapi) {
            let has_path_params = op
                .parameters
                .iter()
                .flatten()
                .any(|p| p.parameter_in == ParameterIn::Path);
            let mut common = vec![
                ("400", "The request is invalid"),
                ("401", "No valid credential"),
                ("403", "The credential may not do this"),
            ];
            if has_path_params {
                common.push(("404", "Not found"));
            }
            if op.request_body.is_some() {
                common.push(("413", "The request body is too large"));
            }
            if let Some(body) = &mut op.request_body {
                let optional = body.content.values().all(|c| match &c.schema {
                    Some(RefOr::Ref(r)) => r
                        .ref_location
                        .strip_prefix("#/components/schemas/")
                        .is_some_and(|n| all_optional.iter().any(|o| o == n)),
                    _ => false,
                });
                if optional {
                    body.required = Some(Required::False);
                }
            }
            for (status, description) in common {
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| error(description).into());
            }
        }
    }
}

/// What each parameter means, by name: the same name means the same thing on every operation,
/// so it is written once here rather than on each annotation.
const PARAMETERS: &[(&str, &str)] = &[
    ("agent_id", "The agent's id (`agent_...`)."),
    (
        "agent_version",
        "Only sessions of this version of `agent_id`.",
    ),
    ("environment_id", "The environment's id (`env_...`)."),
    ("session_id", "The session's id (`sesn_...`)."),
    ("thread_id", "The thread's id (`sthr_...`)."),
    ("resource_id", "The session resource's id (`sesrsc_...`)."),
    ("work_id", "The work item's id (`work_...`)."),
    ("key_id", "The worker key's id."),
    ("vault_id", "The vault's id (`vlt_...`)."),
    ("credential_id", "The credential's id (`vcrd_...`)."),
    ("memory_store_id", "The memory store's id (`memstore_...`)."),
    ("memory_id", "The memory's id (`mem_...`)."),
    (
        "memory_version_id",
        "The memory version's id (`memver_...`).",
    ),
    (
        "view",
        "`basic` (content left out) or `full` (content included; list pages then hold at most 20 items).",
    ),
    (
        "path_prefix",
        "Only memories below this path, which ends with `/` and matches whole segments.",
    ),
    (
        "depth",
        "0 (default): every memory below the prefix; N: those at most N segments below it, deeper ones rolled up into `memory_prefix` items.",
    ),
    (
        "expected_content_sha256",
        "Apply only while the memory's content has this SHA-256 (64 lowercase hex characters); 409 otherwise.",
    ),
    (
        "operation",
        "Only versions recording this change: `created`, `modified` or `deleted`.",
    ),
    ("api_key_id", "Only versions written with this API key."),
    (
        "service_account_id",
        "Only versions written by this service account (this server has none).",
    ),
    ("file_id", "The file's id (`file_...`)."),
    ("hook_id", "The hook's id (`hook_...`)."),
    (
        "scope_id",
        "Only files of this scope: the id of the session that produced them.",
    ),
    (
        "ids[]",
        "Only files with these ids (at most 100; not with `page` or `limit`): one page, ids that do not resolve left out.",
    ),
    (
        "model_id",
        "The model's id, as agents name it in `model.id`.",
    ),
    (
        "version",
        "A version of the agent; the latest when left out.",
    ),
    (
        "limit",
        "Items per page (the operation's documented default and maximum apply).",
    ),
    (
        "page",
        "The cursor from a previous page's `next_page` (or `prev_page`).",
    ),
    ("after_id", "Return the models after this id."),
    ("before_id", "Return the models before this id."),
    ("order", "`asc` (oldest first) or `desc` (newest first)."),
    (
        "include_archived",
        "Include archived items (default false).",
    ),
    (
        "statuses[]",
        "Only items in these statuses (repeat the parameter for several).",
    ),
    (
        "types[]",
        "Only events of these types (repeat the parameter for several).",
    ),
    (
        "created_at[gt]",
        "Only items created after this RFC 3339 time.",
    ),
    (
        "created_at[gte]",
        "Only items created at or after this RFC 3339 time.",
    ),
    (
        "created_at[lt]",
        "Only items created before this RFC 3339 time.",
    ),
    (
        "created_at[lte]",
        "Only items created at or before this RFC 3339 time.",
    ),
    (
        "event_deltas[]",
        "Also stream previews (`event_start`/`event_delta`) of these event types while they are generated; never stored.",
    ),
    (
        "after",
        "Replay every event after this event id before the live tail (like the `Last-Event-ID` header).",
    ),
    (
        "block_ms",
        "How long to wait for an item when none is queued (long poll), in milliseconds.",
    ),
    (
        "reclaim_older_than_ms",
        "Also hand out items polled but not acknowledged for this long, in milliseconds.",
    ),
    (
        "desired_ttl_seconds",
        "The lease length the worker asks for, in seconds (capped by the server).",
    ),
    (
        "expected_last_heartbeat",
        "The lease's last heartbeat as the worker saw it; a stale one is refused with 412.",
    ),
    (
        "Anthropic-Worker-ID",
        "A name for the polling worker: counted in the queue statistics and recorded as the item's poller.",
    ),
    // Deployments.
    (
        "deployment_id",
        "The deployment's id (`depl_...`); in lists, only items of this deployment.",
    ),
    ("deployment_run_id", "The deployment run's id (`drun_...`)."),
    (
        "has_error",
        "true: only runs that could not start a session (with `error`); false: only runs with a `session_id`.",
    ),
    (
        "trigger_type",
        "Only runs started this way: `schedule` or `manual`.",
    ),
    (
        "status",
        "Only deployments in this status: `active` or `paused` (not with `include_archived`).",
    ),
];

/// Fills in each parameter's description from [`PARAMETERS`].
struct ParameterDocs;

impl utoipa::Modify for ParameterDocs {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for param in operations(openapi).flat_map(|op| op.parameters.iter_mut().flatten()) {
            if param.description.is_none()
                && let Some((_, d)) = PARAMETERS.iter().find(|(n, _)| *n == param.name)
            {
                param.description = Some((*d).to_string());
            }
        }
    }
}

/// Every operation of the document (the API uses GET, POST and DELETE; PUT for completeness).
fn operations(
    openapi: &mut utoipa::openapi::OpenApi,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    openapi.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
    })
}

/// The document as pretty JSON (what `openapi/openapi.json` holds).
pub fn document() -> String {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    let mut s = doc.to_pretty_json().expect("openapi serializes");
    s.push('\n');
    s
}
